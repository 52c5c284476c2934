# expect: :4: a \(testElement.Echo\): unknown parameter 'pingz' \(did you mean 'pings'\?\)
import sst
a = sst.Component("a", "testElement.Echo")
a.addParam("pingz", 1)
