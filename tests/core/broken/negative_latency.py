# expect: :5: link 'l': negative latency '-1ns'
import sst
a = sst.Component("a", "testElement.Echo")
b = sst.Component("b", "testElement.Echo")
sst.Link("l", "-1ns").connect((a, "port"), (b, "port"))
