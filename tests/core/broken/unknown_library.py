# expect: :3: unknown element library 'cdmx' \(did you mean cdma\?\)
import sst
a = sst.Component("a", "cdmx.GPU")
