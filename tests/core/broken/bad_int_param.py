# expect: :4: a \(testElement.Echo\): parameter 'pings': 'many' is not a valid int
import sst
a = sst.Component("a", "testElement.Echo")
a.addParams({"rounds": 1, "pings": "many"})
