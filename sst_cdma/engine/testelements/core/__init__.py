"""Element library ``coreTestElement``: stand-ins for the SST-core 16 test elements that SST's
own example scripts use (``coreTestComponent``, ``StatisticsComponent.int`` and
``StatisticsComponent.float``), with SST's names, params, ports, statistics and sub-ids, so
those scripts and graph files saved by real SST run here. The StatisticsComponents draw from
SST's own generators (Mersenne, Marsaglia): ``StatisticsComponent.float`` gives SST's values
exactly (SST-core 16's reference output); ``StatisticsComponent.int`` draws one value per
statistic in [0, 1000) per tick, which is not how SST's scales its integers (its reference
values could not be reproduced without SST's source), so its numbers are not SST's."""
