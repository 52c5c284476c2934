"""Shipped model-state compression profiles (``NAME.json``): what each codec does to the weights,
gradients, fp32 master weights and Adam moments of a model trained here; read them with
:func:`sst_cdma.profiles.model_states.load_model_states`. Format: ``docs/profiles.md``."""
