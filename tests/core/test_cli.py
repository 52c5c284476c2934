"""The sst and sst-info commands as a user runs them (real subprocesses)."""
from __future__ import annotations

import os
import subprocess
import sys

from sst_cdma import __version__


def sh(*args, cwd=None):
    """Run a command, finding the scripts installed beside the interpreter under test first
    (not another installation's on PATH)."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "PATH": path})


def test_version_and_help():
    out = sh("sst", "--version")
    assert out.returncode == 0 and __version__ in out.stdout
    out = sh("sst", "--help")
    assert out.returncode == 0
    for option in ("--stop-at", "--model-options", "--timing-info", "--output-directory",
                   "--output-json", "--output-dot", "--run-mode"):
        assert option in out.stdout


def test_run_with_timing_info_and_model_options(repo):
    out = sh("sst", "--timing-info", str(repo / "topologies/phold_torus.py"),
             "--model-options", "--size 3", "--", "--time-limit", "20ns", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert "Simulation is complete, simulated time: " in out.stdout
    assert "Events per second:" in out.stdout and "Run loop time:" in out.stdout
    assert out.stdout.count("node_") == 9  # console statistics of a 3x3 torus


def test_stop_at_from_command_line(repo):
    out = sh("sst", "--stop-at", "5ns", str(repo / "topologies/phold_torus.py"), "--", "--size",
             "2")
    assert "simulated time: 5 ns" in out.stdout


def test_stop_at_zero_is_refused(repo):
    for stop in ("0ps", "0.1ps", "-1ns"):
        out = sh("sst", f"--stop-at={stop}", str(repo / "topologies/phold_torus.py"))
        assert out.returncode == 1 and out.stdout == ""
        assert f"--stop-at {stop}: must be a positive time" in out.stderr
        assert "phold_torus.py" in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


def test_bad_option_is_one_line_exit_1():
    out = sh("sst", "--stop-at")
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1


def test_error_traceback_only_with_verbose(repo, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('import sst\nsst.Component("a", "testElement.Nope")\n')
    quiet = sh("sst", str(bad))
    loud = sh("sst", "-v", str(bad))
    assert quiet.returncode == loud.returncode == 1
    assert "Traceback" not in quiet.stderr and "Traceback" in loud.stderr
    assert quiet.stderr.strip().endswith("unknown element 'testElement.Nope' (library testElement "
                                         "has: Counter, DownTally, Echo, Meter, PHOLD, StatProbe, "
                                         "TapTally, UpTally)")


def test_missing_script_is_an_error():
    out = sh("sst", "no/such/topology.py")
    assert out.returncode == 1 and "no such topology file" in out.stderr


def _sections(*elements: str) -> dict[str, str]:
    """``sst-info ELEMENTS`` (one start of the command): each element's section."""
    out = sh("sst-info", *elements)
    assert out.returncode == 0, out.stderr
    sections = out.stdout.split("Filtering output on Element = ")[1:]
    assert [s.split("\n", 1)[0] for s in sections] == [f'"{e}"' for e in elements]
    return dict(zip(elements, sections))


ELEMENTS = ["cdma.GPU", "cdma.HBM", "cdma.PCIeBridge", "cdma.PCIeSwitch", "cdma.CDMAEngine",
            "cdma.HostMemory", "cdma.Reporter", "testElement.PHOLD"]


def test_sst_info_documents_each_element():
    """One ``sst-info`` naming every element (one start of the command): a section each."""
    for element, section in _sections(*ELEMENTS).items():
        assert "Parameters (" in section and "Ports (" in section, element
        assert "Statistics (" in section, element


def test_sst_info_shows_defaults_and_units():
    shown = _sections("cdma.ZVC", "cdma.CDMAEngine")
    out = shown["cdma.ZVC"]
    assert "codec_unit_throughput: uncompressed bytes per second each unit compresses or " \
           "decompresses (at least 1 MB/s: slower is no hardware unit, and one iteration would " \
           "take years) (B/s)  [32GB/s]" in out
    out = shown["cdma.CDMAEngine"]
    assert "mode: flow: transfers share bandwidth max-min fairly as flows; chunk: transfers " \
           "move in bursts through a bounded buffer (one of: flow, chunk)  [flow]" in out
    assert "filled by: cdma.BplaneZstd, cdma.LZ4, cdma.RLE, cdma.ZVC, cdma.Zlib, cdma.Zstd" in out


def test_sst_info_prints_sst_core_16s_lines_and_numbering(repo):
    """Against SST-core 16's own listing (tests/data/sst-core-16/sst_info_example.txt): the
    element numbered 0 among those shown, no added period, no reStructuredText, SST's lines."""
    out = sh("sst-info", "coreTestElement.StatisticsComponent.int").stdout.rstrip().splitlines()
    ref = (repo / "tests/data/sst-core-16/sst_info_example.txt").read_text().splitlines()
    differ = ("ELEMENT LIBRARY", "Components (", "      ELI version", "      Compiled using",
              "      Checkpointable", "Modules (", "PortModules (", "SubComponents (")
    assert [line for line in out if not line.startswith(differ)] == \
        [line for line in ref if not line.startswith(differ)]
    assert [line.split(":")[0].split(" (")[0] for line in out if line.startswith(differ[3:])] == \
        [line.split(":")[0].split(" (")[0] for line in ref if line.startswith(differ[3:])]
    assert out[2].startswith("ELEMENT LIBRARY 0 = coreTestElement (")
    every = sh("sst-info").stdout
    assert "``" not in every and ":class:" not in every
    assert ".  [" not in sh("sst-info", "testElement.PHOLD").stdout


def test_sst_info_lists_libraries_and_rejects_unknown():
    out = sh("sst-info", "--list")
    assert "cdma: " in out.stdout and "testElement: " in out.stdout
    bad = sh("sst-info", "cdma.GPUU")
    assert bad.returncode == 1 and "has no element 'GPUU'" in bad.stderr


def test_sst_info_names_the_interfaces_each_port_provides():
    shown = _sections("cdma.HBM", "cdma.HostMemory", "cdma.GPU")
    assert "gpu: the GPU whose kernels use this memory (required) [provides MemoryPool]" \
        in shown["cdma.HBM"]
    assert "[provides HostStore, HostPath]" in shown["cdma.HostMemory"]
    assert "[provides" not in shown["cdma.GPU"]
