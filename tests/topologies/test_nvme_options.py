"""The NVMe tier's model options refuse what they cannot build in one line naming the option:
offloading to NVMe with no drive, an unknown preset (with the closest names), a drive option
without drives, a drive that fills up; ``sst`` prints the line and exits non-zero."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from progress_lines import without_progress
from sst_in_process import run_sst

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
SMALL = ["--no-baselines", "--network", "alexnet", "--batch", "16"]


def refused(*opts: str) -> str:
    with pytest.raises(RunError) as err:
        sst_cdma.run(PASCAL, [*SMALL, *opts], console=io.StringIO())
    text = str(err.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("opts,message", [
    (["--offload-to", "nvme"], "--offload-to nvme needs an NVMe SSD to offload to: give "
                               "--nvme N (N >= 1)"),
    (["--nvme", "1", "--nvme-preset", "micron745"],
     "--nvme-preset 'micron745' is not a known SSD (did you mean micron7450? one of "
     "micron7450, micron9550; docs/storage.md)"),
    (["--nvme", "1", "--nvme-preset", "pm9a3"],
     "--nvme-preset 'pm9a3' is not a known SSD (one of micron7450, micron9550"),
    (["--nvme-path", "gds"], "--nvme-path needs --nvme N: it describes the SSDs, and this "
                             "run has none"),
    (["--nvme-capacity", "1TB"], "--nvme-capacity needs --nvme N"),
    (["--nvme", "-1"], "argument --nvme: '-1' must be >= 0 (0: no SSD)"),
    # the attack: more drives than a host's PCIe numbers (it ran until killed)
    (["--nvme", "100000"], "argument --nvme: '100000' must be <= 256 (each drive is a PCIe "
                           "endpoint on a bus of its own, and a host's PCIe segment numbers at "
                           "most 256 buses: the bus number is 8 bits)"),
    (["--nvme", "1", "--nvme-queue-depth", "1e23"], "argument --nvme-queue-depth: '1e23' must "
     "be <= 65536 (an NVMe I/O queue holds at most 65,536 commands: the NVMe base "
     "specification's CAP.MQES is a 16-bit count from 1)"),
    (["--nvme", "1", "--offload-to", "disk"], "argument --offload-to: 'disk' is not one of "
                                             "host, nvme"),
    (["--nvme", "1", "--nvme-path", "direct"], "argument --nvme-path: 'direct' is not one of "
                                              "bounce, gds"),
])
def test_nvme_options_that_cannot_be_built_are_refused(opts, message):
    assert message in refused(*opts)


def test_a_full_drive_stops_the_run_naming_the_drive_the_tensor_and_the_option():
    text = refused("--nvme", "1", "--offload-to", "nvme", "--nvme-capacity", "10MB")
    assert "nvme0 (cdma.NVMe): NVMe capacity exhausted storing 'gpu0.dma/" in text
    assert "bytes short" in text and "--nvme-capacity" in text


def test_striping_and_compression_each_make_the_tier_hold_more():
    # alexnet batch 16 offloads 25.4 MB raw, 18.7 MB through zvc: two 10 MB drives hold the
    # compressed bytes and not the plain copies, which three drives hold
    two = ["--nvme", "2", "--offload-to", "nvme", "--nvme-capacity", "10MB"]
    assert "bytes short" in refused(*two, "--algorithm", "none")
    for opts in ([*two, "--algorithm", "zvc"],
                 ["--nvme", "3", "--offload-to", "nvme", "--nvme-capacity", "10MB",
                  "--algorithm", "none"]):
        result = sst_cdma.run(PASCAL, [*SMALL, *opts], console=io.StringIO())
        assert result.reports["summary"]["iteration_time_s"] > 0


def test_sst_prints_the_overshoot_in_one_line_and_exits_non_zero():
    done = run_sst(PASCAL, "--", *SMALL, "--nvme", "1", "--offload-to", "nvme",
                   "--nvme-capacity", "10MB", cwd=REPO)
    assert done.returncode != 0
    lines = without_progress(done.stderr).strip().splitlines()  # a loaded machine's progress
    assert len(lines) == 1 and "NVMe capacity exhausted" in lines[0], done.stderr
