# expect: :4: NameError: name 'undefined_thing' is not defined
import sst
a = sst.Component("a", "testElement.Echo")
a.addParam("pings", undefined_thing)
