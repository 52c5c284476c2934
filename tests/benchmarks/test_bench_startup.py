"""bench_startup: the import table counts the element modules the library loads by name."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_startup  # noqa: E402


def test_the_table_counts_the_element_modules_the_library_loads_by_name():
    log = bench_startup.importtime_log(REPO / "topologies" / "pascal_cdma.py")
    logged = {line.rsplit("|", 1)[1].strip() for line in log.splitlines()
              if line.startswith("import time:")}
    # the GPU, its engine and the reporter: found by the library by name, never by an import
    # statement of the run
    assert {"components.gpu", "components.cdma_engine", "components.reporter"} <= logged
    assert {"numpy", "networkx", "sst_cdma.builder.topology"} <= logged


def test_import_times_sums_each_packages_own_time():
    log = ("import time: self [us] | cumulative | imported package\n"
           "import time:       100 |        100 |     components.gpu\n"
           "import time:        50 |        150 |   components\n"
           "import time:         7 |          7 | numpy\n")
    assert bench_startup.import_times(log) == {"components": (2, 150.0), "numpy": (1, 7.0)}
