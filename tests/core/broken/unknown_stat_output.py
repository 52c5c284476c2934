# expect: :3: unknown statistic output 'sst.statOutputXML'
import sst
sst.setStatisticOutput("sst.statOutputXML")
