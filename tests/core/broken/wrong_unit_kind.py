# expect: :4: n \(testElement.PHOLD\): parameter 'time_limit': '9GB' is not a time \(expected s or Hz\)
import sst
n = sst.Component("n", "testElement.PHOLD")
n.addParam("time_limit", "9GB")
