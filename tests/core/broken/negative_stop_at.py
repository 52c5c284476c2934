# expect: --stop-at -5ns: must be a positive time
import sst
sst.setProgramOption("stop-at", "-5ns")
n = sst.Component("n", "testElement.PHOLD")
