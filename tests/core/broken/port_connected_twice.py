# expect: :7: port a.port is connected twice \(links 'l1', 'l2'\)
import sst
a = sst.Component("a", "testElement.Echo")
b = sst.Component("b", "testElement.Echo")
c = sst.Component("c", "testElement.Echo")
sst.Link("l1", "1ns").connect((a, "port"), (b, "port"))
sst.Link("l2", "1ns").connect((a, "port"), (c, "port"))
