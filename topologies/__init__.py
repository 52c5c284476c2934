"""The shipped topology scripts: SST Python configuration files, run by ``sst`` (never
imported). Installed with the package, so that ``sst pascal_cdma.py`` finds the script by its
bare name when the working folder has no file of that name, and ``sst-cdma topologies``
lists them (``docs/topologies.md``, "Shipped topologies")."""
