# expect: :4: a \(testElement.Echo\): parameter 'rounds': '-1' must be >= 0
import sst
a = sst.Component("a", "testElement.Echo")
a.addParam("rounds", -1)
