"""Command-line entry points: ``sst``, ``sst-info`` and ``sst-cdma``."""
