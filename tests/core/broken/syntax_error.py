# expect: :3: syntax error: '\(' was never closed
import sst
a = sst.Component("a", "testElement.Echo"
b = 1
