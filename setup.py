"""Package layout: ``components/`` and ``workloads/`` install as ``sst_cdma.components`` and
``sst_cdma.workloads`` so site-packages holds one top-level package. Everything else is in
pyproject.toml."""
from setuptools import find_packages, setup

MAPPED = {"sst_cdma.components": "components", "sst_cdma.workloads": "workloads"}

packages = find_packages(include=["sst_cdma", "sst_cdma.*"])
for name, folder in MAPPED.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir={"sst_cdma": "sst_cdma", **MAPPED})
