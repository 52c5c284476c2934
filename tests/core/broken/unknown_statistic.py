# expect: :4: a \(testElement.Echo\) has no statistic 'arrivals' \(statistics: arrival_ps\)
import sst
a = sst.Component("a", "testElement.Echo")
a.enableStatistics(["arrivals"])
