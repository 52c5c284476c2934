# expect: --stop-at 0ps: must be a positive time
import sst
sst.setProgramOption("stop-at", "0ps")
n = sst.Component("n", "testElement.PHOLD")
