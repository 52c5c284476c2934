# expect: :5: link 'l' is dangling: only a.port is connected
import sst
a = sst.Component("a", "testElement.Echo")
b = sst.Component("b", "testElement.Echo")
l = sst.Link("l", "1ns")
a.addLink(l, "port")
