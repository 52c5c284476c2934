"""The SST engine: the event kernel, elements, the simulation, the configuration graph and
the ``sst`` API, graph files, the element library loader, statistics, the runner, the output
folder, units, flows, and the safe-file helpers. It imports nothing above it."""
