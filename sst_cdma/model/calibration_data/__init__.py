"""Measurement data the kernel model is fitted to (``sst-cdma calibrate``); each subfolder is
one source, with a README giving its origin and license."""
