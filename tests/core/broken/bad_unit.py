# expect: :4: n \(testElement.PHOLD\): parameter 'max_delay': cannot parse '9 nx': unknown unit 'nx'
import sst
n = sst.Component("n", "testElement.PHOLD")
n.addParam("max_delay", "9 nx")
