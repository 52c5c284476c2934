# expect: :3: a \(testElement.Echo\): required port 'port' is not connected
import sst
a = sst.Component("a", "testElement.Echo")
