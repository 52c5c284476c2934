"""Shipped activation density profiles (``NAME.json``, one per network); read them with
:func:`sst_cdma.profiles.load_profile`. Format: ``docs/profiles.md``."""
