# expect: :3: unknown element 'testElement.Ech' \(did you mean testElement.Echo\?\)
import sst
a = sst.Component("a", "testElement.Ech")
