"""Bad inputs of issue #12: each is refused with one line naming the option (or file) and the
fault, and ``sst`` exits non-zero."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"


def run(*opts: str, topology: Path = PASCAL, **kwargs):
    """Run a topology in-process, its console captured."""
    console = io.StringIO()
    return sst_cdma.run(topology, list(opts), console=console, **kwargs), console.getvalue()


def refused(*opts: str, topology: Path = PASCAL, **kwargs) -> str:
    """The one-line refusal of a run (the RunError as the ``sst`` command prints it)."""
    with pytest.raises(RunError) as err:
        run(*opts, topology=topology, **kwargs)
    text = str(err.value)
    assert "\n" not in text, text
    return text


def sst(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The ``sst`` command in a subprocess."""
    return subprocess.run([sys.executable, "-m", "sst_cdma.cli.sst_main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


# -- 17: NaN and infinity ----------------------------------------------------------------------
@pytest.mark.parametrize("opts,message", [
    (["--progress", "nan"], "argument --progress: 'nan' is not a finite number"),
    (["--progress", "inf"], "argument --progress: 'inf' is not a finite number"),
    (["--compute-efficiency", "nan"],
     "argument --compute-efficiency: 'nan' is not a finite number"),
    (["--compute-efficiency=-inf"],
     "argument --compute-efficiency: '-inf' is not a finite number"),
    (["--engine-throughput", "nan"], "'engine_throughput': 'nan' is not a number"),
    (["--engine-throughput", "1e400GB/s"], "'engine_throughput': '1e400GB/s' is too large"),
])
def test_nan_and_infinity_are_refused_in_model_options(opts, message):
    assert message in refused("--no-baselines", "--network", "alexnet", *opts)


def test_nan_in_an_element_param_override_is_refused():
    text = refused("--no-baselines", "--network", "alexnet", "--kernel-model", "roofline",
                   overrides={"gpu0": {"peak_flops": "nan"}})
    assert "'peak_flops'" in text and "'nan' is not a finite number" in text
