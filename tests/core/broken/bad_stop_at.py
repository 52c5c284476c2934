# expect: --stop-at: cannot parse '10 parsecs'
import sst
sst.setProgramOption("stop-at", "10 parsecs")
n = sst.Component("n", "testElement.PHOLD")
