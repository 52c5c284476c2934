# expect: :5: link 'l' has no latency for end a.port and no default latency
import sst
a = sst.Component("a", "testElement.Echo")
b = sst.Component("b", "testElement.Echo")
sst.Link("l").connect((a, "port"), (b, "port"))
