# expect: :4: duplicate component name 'a' \(first defined at .*:3\)
import sst
a = sst.Component("a", "testElement.Echo")
b = sst.Component("a", "testElement.Echo")
