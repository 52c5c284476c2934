# expect: :5: b \(testElement.Echo\) has no port 'prt' \(ports: port\)
import sst
a = sst.Component("a", "testElement.Echo")
b = sst.Component("b", "testElement.Echo")
sst.Link("l", "1ns").connect((a, "port"), (b, "prt"))
