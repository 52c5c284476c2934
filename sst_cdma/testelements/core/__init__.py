"""Element library ``coreTestElement``: stand-ins for the SST-core 16 test elements that SST's
own example scripts use (``coreTestComponent``, ``StatisticsComponent.int`` and
``StatisticsComponent.float``), with the same names, params, ports and statistics, so those
scripts and graph files saved by real SST run here. Their behaviour is simpler than SST's: the
numbers they produce are not SST's."""
