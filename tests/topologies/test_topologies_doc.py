"""Every script, excerpt and command of docs/topologies.md runs or is checked, and what the guide
says about their output holds.

A block is tested as the HTML comment on the line above its fence says:

- ``<!-- test: file PATH -->``: the block is the whole of PATH (a file of the repository);
- ``<!-- test: excerpt PATH -->``: the block appears, verbatim, in PATH;
- ``<!-- test: topology NAME [-- OPTIONS] -->``: a topology script, run as ``sst NAME -- OPTIONS``;
- ``<!-- test: edit PATH -->``: the block's last line is a line of PATH; the lines above it go
  before that line, and the edited script runs;
- ``<!-- test: python -->``: a Python program, run from a folder holding the repository's
  ``topologies/``;
- ``<!-- test: shell -->``: one ``sst`` or ``sst-info`` command a line, each run from such a
  folder;
- ``<!-- test: sweep-spec PATH -->``: a sweep spec, saved at PATH in such a folder; its points
  run.

Every python, sh and yaml block has one.
"""
from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

import sst_cdma
from sst_cdma.builder.model_options import ELEMENT_OPTIONS
from sst_cdma.tools.cli.sst_info import main as sst_info_main
from sst_cdma.tools.cli.sst_main import main as sst_main
from sst_cdma.tools.sweep.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "topologies.md"
KINDS = ("file", "excerpt", "topology", "edit", "python", "shell", "sweep-spec")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
MARK = re.compile(r"<!-- test: ([\w-]+)(?: (.*?))? -->\n$")
#: the guide's commands and the ``main`` of each one's console script
COMMANDS = {"sst": sst_main, "sst-info": sst_info_main}
RC = "root_complex_4gpu.py"
RC_OPTIONS = ["--network", "alexnet", "--batch", "32", "--policy", "all"]


@dataclass(frozen=True)
class Block:
    """One fenced block of the guide: its language, code, the line it starts on and its test
    marker (kind and argument; kind "" when it has none)."""

    lang: str
    code: str
    line: int
    kind: str
    arg: str

    @property
    def label(self) -> str:
        return f"topologies.md:{self.line}:{self.kind}"


@lru_cache(maxsize=1)
def blocks() -> tuple[Block, ...]:
    text = DOC.read_text(encoding="utf-8")
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()]
        last = before[before.rstrip("\n").rfind("\n") + 1:]
        mark = MARK.match(last)
        out.append(Block(match.group(1), match.group(2), before.count("\n") + 1,
                         mark.group(1) if mark else "", (mark.group(2) or "") if mark else ""))
    return tuple(out)


def of_kind(*kinds: str) -> list[Block]:
    return [b for b in blocks() if b.kind in kinds]


def block(kind: str, arg: str) -> Block:
    found = [b for b in blocks() if b.kind == kind and b.arg.startswith(arg)]
    assert len(found) == 1, (kind, arg, found)
    return found[0]


def commands() -> list[str]:
    return [line for b in of_kind("shell") for line in b.code.splitlines() if line.strip()]


def run(script: Path, options: list[str], **kwargs: Any) -> tuple[Any, str]:
    console = io.StringIO()
    result = sst_cdma.run(script, options, console=console, **kwargs)
    return result, console.getvalue()


def summary(script: Path, options: list[str], **kwargs: Any) -> dict[str, Any]:
    return run(script, options, **kwargs)[0].reports["summary"]


def same_apart_from_gpu_name(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def strip(s):
        return json.dumps({k: v for k, v in s.items() if k != "gpu"}, sort_keys=True)
    return strip(a) == strip(b)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder holding the repository's topologies, as the guide's commands expect."""
    (tmp_path / "topologies").symlink_to(REPO / "topologies")
    return tmp_path


def save(folder: Path, b: Block) -> Path:
    name = b.arg.split(" -- ")[0].strip()
    path = folder / name
    path.write_text(b.code, encoding="utf-8")
    return path


def options_of(b: Block) -> list[str]:
    return shlex.split(b.arg.split(" -- ", 1)[1]) if " -- " in b.arg else []


def edited(b: Block) -> str:
    """The file of an ``edit`` block with the block's lines put before its last line."""
    lines = b.code.splitlines()
    original = (REPO / b.arg).read_text(encoding="utf-8").splitlines()
    assert original.count(lines[-1]) == 1, f"{b.label}: {lines[-1]!r} is not one line of {b.arg}"
    at = original.index(lines[-1])
    return "\n".join(original[:at] + lines + original[at + 1:]) + "\n"


# -- every block is tested, and files and excerpts are what the repository holds ------------------
def test_every_script_and_command_block_says_how_it_is_tested():
    assert blocks(), "no blocks found"
    for b in blocks():
        if b.lang in ("python", "sh", "yaml"):
            assert b.kind in KINDS, f"{b.label}: a {b.lang} block without a test marker"
        else:
            assert b.kind == "", f"{b.label}: a marker on a {b.lang or 'plain'} block"


@pytest.mark.parametrize("b", of_kind("file"), ids=lambda b: b.arg)
def test_a_file_block_is_the_file(b):
    assert b.code == (REPO / b.arg).read_text(encoding="utf-8"), b.label


@pytest.mark.parametrize("b", of_kind("excerpt"), ids=lambda b: f"{b.arg}:{b.line}")
def test_an_excerpt_is_in_its_file(b):
    assert b.code in (REPO / b.arg).read_text(encoding="utf-8"), b.label


def run_command(command: str, workdir: Path, monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run one of the guide's commands from ``workdir`` through its console script's ``main``,
    in this process (the console scripts themselves start in tests/core/test_cli.py); its exit
    status, standard output and standard error."""
    program, *args = shlex.split(command)
    assert program in COMMANDS, f"{command!r}: the guide's commands are sst and sst-info"
    monkeypatch.chdir(workdir)
    capsys.readouterr()
    try:
        code = COMMANDS[program](args)
    except SystemExit as exc:  # a topology script's own --help ends its process
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", commands())
def test_each_command_runs(command, workdir, monkeypatch, capsys):
    code, _, err = run_command(command, workdir, monkeypatch, capsys)
    assert code == 0, (command, err)


def test_the_python_example_prints_the_oracle_with_the_override(workdir):
    b = block("python", "")
    out = subprocess.run([sys.executable, "-c", b.code], cwd=workdir, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    after_build = summary(save(workdir, block("topology", "p100_hbm_500.py")),
                          options_of(block("topology", "p100_hbm_500.py")))
    # the run prints nothing (its summary is on the result), the example the oracle's time
    assert out.stdout.count("\n") == 1
    assert float(out.stdout) == after_build["baselines"]["oracle"]["iteration_time_s"]


# -- section 1: build() ------------------------------------------------------------------------
def test_the_element_options_table_is_the_generated_options():
    text = DOC.read_text(encoding="utf-8")
    elements = dict.fromkeys(o.element for o in ELEMENT_OPTIONS)
    assert {"cdma.GPU", "cdma.CDMAEngine", "cdma.CDMAEngine:codec", "cdma.PCIeBridge",
            "cdma.NVSwitch"} <= set(elements)
    for element in elements:
        row = re.search(rf"^\| `{re.escape(element)}`[^|]* \| (.*) \|$", text, re.M)
        assert row, element
        flags = set(re.findall(r"`(--[\w-]+)`", row.group(1)))
        assert flags == {o.flag for o in ELEMENT_OPTIONS if o.element == element}, element


def test_the_names_build_gives_are_the_guides(workdir):
    result, _ = run(REPO / "topologies" / "pascal_cdma.py",
                    ["--network", "alexnet", "--batch", "8", "--gpus", "4", "--gpus-per-switch",
                     "2", "--gpus-per-host", "2", "--simulate-every-node"], run_mode="init")
    types = {c.name: c.type for c in result.graph.components.values()}
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| name | element | what |"):text.index("The links are")]
    checked = 0
    for row in [r for r in table.splitlines()[2:] if r.startswith("|")]:
        names, element = row.strip().strip("|").split("|")[0:2]
        listed = re.findall(r"`([\w.]+)`", names)
        checked += len(listed)
        for name in listed:
            assert name in types, name
            if element.strip():
                assert types[name] in re.findall(r"`(cdma\.\w+)`", element), name
    assert checked == 16
    for i in range(4):
        assert types[f"gpu{i}"] == "cdma.GPU" and types[f"vdnn.gpu{i}.pcie"] == "cdma.PCIeBridge"
        assert types[f"oracle.gpu{i}.hbm"] == "cdma.HBM"
    links = set(result.graph.links)
    for link in ("l_hbm", "l_dma", "l_dram", "l_pcie", "l_host"):
        assert f"gpu3.{link}" in links and f"vdnn.gpu3.{link}" in links
    assert {"switch0.l_up", "switch1.l_up", "oracle.gpu0.l_hbm"} <= links
    assert not any(name.startswith("oracle.") and "dma" in name for name in types)


def test_the_variation_is_what_the_guide_says(workdir):
    b = block("topology", "h100_gen4_switches.py")
    script = save(workdir, b)
    result, console = run(script, options_of(b))
    s = result.reports["summary"]
    assert "system:          8x H100, PCIe gen4, 4 per switch\n" in console
    assert s["gpu_count"] == 8 and len(s["gpus"]) == 8 and s["gpus_per_switch"] == 4
    assert s["policy"] == "all" and s["host_link"]["name"] == "pcie4x16"
    assert "switch uplink:   2 shared" in console
    assert summary(script, [*options_of(b), "--policy", "conv"])["policy"] == "conv"


# -- section 2: by hand ------------------------------------------------------------------------
def test_the_hand_wired_p100_prints_the_main_jobs_summary(workdir, monkeypatch, capsys):
    shown = [c for c in commands() if "hand_wired_p100" in c or c == "sst topologies/pascal_cdma.py"]
    assert len(shown) == 2
    outputs = [run_command(c, workdir, monkeypatch, capsys)[1] for c in shown]
    # the same summary; its hint names the policy in each caller's words: the param for the
    # script wired by hand (no command line), the flag under pascal_cdma.py's
    hand, built = (outputs[shown.index(c)] for c in sorted(shown, key=lambda c: "hand" not in c))
    assert "policy=none (or auto" in hand and "--policy none (or auto" in built
    assert hand.replace("policy=none (or auto", "--policy none (or auto") == built
    assert "oracle:" in hand


# -- section 3: one param in every system ----------------------------------------------------------
@pytest.fixture(scope="module")
def hbm_500(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """The section's ways to run pascal_cdma.py with 500 GB/s of HBM, and the P100's own."""
    folder = tmp_path_factory.mktemp("hbm")
    small = ["--network", "alexnet", "--batch", "32"]
    edit = block("edit", "topologies/hand_wired_p100.py")
    hand = folder / "hand.py"
    hand.write_text(edited(edit).replace('"network": "vgg16", "batch": 64',
                                         '"network": "alexnet", "batch": 32'), encoding="utf-8")
    after = block("topology", "p100_hbm_500.py")
    assert options_of(after) == small
    pascal = REPO / "topologies" / "pascal_cdma.py"
    return {"hand": summary(hand, []), "after_build": summary(save(folder, after), small),
            "override": summary(pascal, small, overrides={"*.hbm": {"bandwidth": "500GB/s"}}),
            "main_only": summary(pascal, small, overrides={"gpu0.hbm": {"bandwidth": "500GB/s"}}),
            "p100": summary(pascal, small)}


def test_the_three_ways_give_the_same_summary(hbm_500):
    assert same_apart_from_gpu_name(hbm_500["hand"], hbm_500["after_build"])
    assert hbm_500["hand"]["gpu"] == "P100"
    assert hbm_500["after_build"] == hbm_500["override"]


def test_the_oracle_is_slower_with_the_slower_memory_unless_only_the_main_system_has_it(hbm_500):
    oracle = {k: s["baselines"]["oracle"]["iteration_time_s"] for k, s in hbm_500.items()}
    assert oracle["override"] > oracle["p100"]
    assert oracle["main_only"] == oracle["p100"]
    assert hbm_500["main_only"]["iteration_time_s"] == hbm_500["override"]["iteration_time_s"]


def test_the_guides_hbm_sweep_is_shipped_and_parses():
    b = block("sweep-spec", "sweeps/hbm_bandwidth.yaml")
    shipped = REPO / b.arg
    assert b.code == shipped.read_text(encoding="utf-8")
    points = load_spec(shipped).points
    assert [p.overrides() for p in points] == [{"*.hbm": {"bandwidth": "500GB/s"}},
                                               {"*.hbm": {"bandwidth": "732GB/s"}}]
    assert all(p.topology == (REPO / "topologies" / "pascal_cdma.py").resolve() for p in points)


def test_the_sweep_spec_runs_the_override_as_an_axis(hbm_500, workdir):
    b = block("sweep-spec", "sweeps/hbm_bandwidth.yaml")
    path = workdir / b.arg
    path.parent.mkdir()
    path.write_text(b.code, encoding="utf-8")
    points = load_spec(path).points
    assert [p.overrides() for p in points] == [{"*.hbm": {"bandwidth": "500GB/s"}},
                                               {"*.hbm": {"bandwidth": "732GB/s"}}]
    got = [summary(p.topology, p.model_options(), overrides=p.overrides()) for p in points]
    assert got == [hbm_500["override"], hbm_500["p100"]]


# -- section 5: the root complex -----------------------------------------------------------------
@pytest.fixture(scope="module")
def root_complex() -> dict[str, tuple[Any, str]]:
    script = REPO / "topologies" / RC
    return {"rc": run(script, RC_OPTIONS), "none": run(script, [*RC_OPTIONS, "--no-root-complex"]),
            "wide": run(script, [*RC_OPTIONS, "--root-complex-bandwidth", "49.8GB/s"]),
            "narrow": run(script, [*RC_OPTIONS, "--root-complex-bandwidth", "12.44GB/s"])}


def test_the_guide_runs_the_root_complex_as_the_tests_do():
    assert f"sst topologies/{RC} -- {' '.join(RC_OPTIONS)}" in commands()
    assert f"sst topologies/{RC} -- {' '.join(RC_OPTIONS)} --no-root-complex" in commands()


def test_without_the_root_complex_it_is_the_main_topology_with_four_gpus(root_complex):
    built = summary(REPO / "topologies" / "pascal_cdma.py", [*RC_OPTIONS, "--gpus", "4"])
    assert root_complex["none"][0].reports["summary"] == built


def test_stall_and_the_cdma_speedup_grow_behind_the_root_complex(root_complex):
    rc, none = (root_complex[k][0].reports["summary"] for k in ("rc", "none"))
    assert none["stall_time_s"] < 2 / 3 * rc["stall_time_s"]
    assert rc["gpus"][0]["speedup_vs_vdnn"] > none["gpus"][0]["speedup_vs_vdnn"]
    assert rc["baselines"]["oracle"] == none["baselines"]["oracle"]
    assert "switch_utilization" not in none and none["gpus_per_switch"] == 0


def test_the_root_complex_carries_every_wire_byte_once_each_way(root_complex):
    result, _ = root_complex["rc"]
    s = result.reports["summary"]
    u = s["switch_utilization"]["rc"]
    assert u["kind"] == "root complex" and u["bandwidth_Bps"] == 31.1e9
    assert u["d2h"] == pytest.approx(4 * s["pcie_utilization"]["d2h"] * s["pcie_bandwidth_Bps"]
                                     / 31.1e9, rel=1e-12)
    record = result.results["rc"]
    bridges = [result.results[f"gpu{i}.pcie"] for i in range(4)]
    assert record.d2h_bytes == pytest.approx(s["wire_bytes"], rel=1e-12)
    assert record.d2h_bytes == pytest.approx(sum(b.d2h_bytes for b in bridges), rel=1e-12)
    assert record.h2d_bytes == pytest.approx(sum(b.h2d_bytes for b in bridges), rel=1e-12)
    assert 0 < record.h2d_bytes <= record.d2h_bytes
    assert s["gpus_per_switch"] == 0


def test_a_root_complex_of_four_links_stalls_as_none_and_of_one_link_more(root_complex):
    stall = {k: root_complex[k][0].reports["summary"]["stall_time_s"] for k in root_complex}
    assert stall["wide"] == pytest.approx(stall["none"], rel=1e-9)
    assert stall["narrow"] > stall["rc"]


def test_the_sample_output_has_the_runs_lines(root_complex):
    sample = next(b.code for b in blocks() if b.lang == "text" and "root complex:" in b.code)
    def mask(text):
        return re.sub(r"\d+(\.\d+)?", "#", text)
    got = root_complex["rc"][1].splitlines()
    assert [mask(ln) for ln in sample.splitlines()] == [mask(ln) for ln in got[:len(sample.splitlines())]]


@pytest.mark.parametrize("options, fault", [
    (["--gpus", "0"], f"{RC}:30: model option error: --gpus must be >= 1, got 0"),
    (["--gpu", "volta"], f"{RC}:28: model option error: unrecognized arguments: --gpu volta"),
    (["--root-complex-bandwidth", "fast"], f"{RC}:37: rc (cdma.RootComplex): parameter "
     "'bandwidth': "),
])
def test_the_root_complex_topology_refuses_bad_options_in_one_line(options, fault):
    with pytest.raises(sst_cdma.RunError) as err:
        run(REPO / "topologies" / RC, options)
    assert fault in str(err.value) and "\n" not in str(err.value)


# -- section 6: the HGX node ---------------------------------------------------------------------
HGX = "hgx_h100_cdma.py"
HGX_OPTIONS = ["--network", "alexnet", "--batch", "32", "--policy", "all"]


@pytest.fixture(scope="module")
def hgx() -> dict[str, tuple[Any, str]]:
    script = REPO / "topologies" / HGX
    return {"dp": run(script, HGX_OPTIONS),
            "no_dp": run(script, [*HGX_OPTIONS, "--no-data-parallel"]),
            "one": run(script, [*HGX_OPTIONS, "--gpus", "1", "--no-data-parallel"])}


def test_the_guide_runs_the_hgx_node_as_the_tests_do():
    base = f"sst topologies/{HGX} -- {' '.join(HGX_OPTIONS)}"
    assert {base, f"{base} --no-data-parallel", f"{base} --gpus 1 --no-data-parallel"} <= \
        set(commands())


def test_the_hgx_sample_line_is_the_runs(hgx):
    sample = next(b.code for b in blocks() if b.lang == "text" and "all-reduce:" in b.code)
    assert sample.strip() in hgx["dp"][1].splitlines()


def test_the_hgx_reading_holds(hgx):
    dp, no_dp, one = (hgx[k][0].reports["summary"] for k in ("dp", "no_dp", "one"))
    a = dp["allreduce"]
    assert a["bytes_per_gpu"] == round(2 * 7 / 8 * a["gradient_bytes"])
    assert round(a["gradient_bytes"] / 1e5) == 2439 and round(a["bytes_per_gpu"] / 1e5) == 4268
    assert a["buckets"] == 4
    assert a["time_s"] == a["idle_time_s"]
    assert a["slowed_by_offloads_s"] == 0 and a["offloads_slowed_s"] == 0
    assert 0 < a["exposed_s"] < a["overlap_s"]
    assert dp["compute_time_s"] > one["compute_time_s"]
    assert "allreduce" not in no_dp and "allreduce" not in one
    assert no_dp["stall_time_s"] > one["stall_time_s"]
    assert dp["iteration_time_s"] > no_dp["iteration_time_s"]


def test_the_hgx_sweep_is_the_shipped_one_and_runs(workdir):
    b = block("sweep-spec", "sweeps/hgx.yaml")
    assert b.code == (REPO / b.arg).read_text(encoding="utf-8")
    path = workdir / b.arg
    path.parent.mkdir()
    path.write_text(b.code, encoding="utf-8")
    points = load_spec(path).points
    got = [summary(p.topology, p.model_options()) for p in points]
    assert [("allreduce" in s, s["algorithm"]) for s in got] == \
        [(True, "none"), (True, "zvc"), (False, "none"), (False, "zvc")]
    assert all(s["gpu_count"] == 8 for s in got)
