"""The system builder: the topology options and presets that wire a system of elements
(``sst_cdma.builder.topology``), the model options generated from the elements' params, and
the baselines run beside a system."""
