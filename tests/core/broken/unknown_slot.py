# expect: :4: a \(testElement.Echo\) has no subcomponent slot 'counters' \(slots: counter\)
import sst
a = sst.Component("a", "testElement.Echo")
a.setSubComponent("counters", "testElement.Counter")
