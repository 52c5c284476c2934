"""``cdma.NVMe``: what reaches the drives (the compressed bytes, in stripes), where the drives sit
(behind the switch or on the root ports) and which links each path loads, the store's capacity,
and the element's documentation."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest

import sst_cdma
from sst_cdma.model.links import PCIeLink
from sst_cdma.model.ssds import SSDS

SMALL = ("--network", "alexnet", "--batch", "16", "--policy", "conv")


def run(repo, *opts, baselines=False):
    extra = () if baselines else ("--no-baselines",)
    return sst_cdma.run(repo / "topologies" / "pascal_cdma.py", [*extra, *SMALL, *opts],
                        console=io.StringIO())


def offloads(result, engine="gpu0.dma"):
    return [t for t in result.simulation.components[engine].transfers if t[0] == "offload"]


def test_the_drives_receive_the_compressed_bytes_in_equal_stripes(repo):
    result = run(repo, "--nvme", "3", "--offload-to", "nvme", "--algorithm", "zvc")
    sent = offloads(result)
    raw, wire = sum(t[2] for t in sent), sum(t[3] for t in sent)
    assert wire < raw  # zvc compresses alexnet's ReLU outputs
    drives = [result.simulation.components[f"nvme{d}"] for d in range(3)]
    written = [d.write.busy_units for d in drives]
    assert sum(written) == pytest.approx(wire)
    assert max(written) - min(written) == pytest.approx(0, abs=1e-6 * wire)
    assert sum(d.peak for d in drives) == wire  # nothing is released before the end
    assert max(d.peak for d in drives) - min(d.peak for d in drives) <= len(sent)
    summary = result.reports["summary"]
    assert summary["wire_bytes"] == wire
    # the host pool holds nothing: the offloads went to the drives
    assert result.simulation.components["host"].peak == 0


def test_offloads_to_the_host_leave_the_drives_idle(repo):
    result = run(repo, "--nvme", "1")
    drive = result.simulation.components["nvme0"]
    assert drive.write.busy_units == 0 and drive.read.busy_units == 0 and drive.peak == 0
    assert result.simulation.components["host"].peak > 0


@pytest.mark.parametrize("path", ["gds", "bounce"])
def test_behind_a_shared_switch_only_the_bounce_path_loads_its_upstream_port(repo, path):
    result = run(repo, "--gpus", "2", "--gpus-per-switch", "2", "--nvme", "1",
                 "--offload-to", "nvme", "--nvme-path", path)
    sim = result.simulation.components
    moved = [t for e in ("gpu0.dma", "gpu1.dma") for t in sim[e].transfers]
    wire = sum(t[3] for t in moved if t[0] == "offload")
    fetched = sum(t[3] for t in moved if t[0] == "prefetch")
    switch = sim["switch0"]
    assert sim["nvme0"].write.busy_units == pytest.approx(wire)
    assert sim["nvme0"].read.busy_units == pytest.approx(fetched)
    if path == "gds":  # peer to peer below the switch: nothing above it
        assert switch.d2h.busy_units == 0 and switch.h2d.busy_units == 0
        assert sim["host"].resource.busy_units == 0
    else:  # up to host memory on the GPUs' side and down again on the drive's, each way
        assert switch.d2h.busy_units == pytest.approx(wire + fetched)
        assert switch.h2d.busy_units == pytest.approx(wire + fetched)
        assert sim["host"].resource.busy_units == pytest.approx(2 * (wire + fetched))


def test_a_drive_sits_behind_the_switch_after_its_gpus_and_on_a_root_port_without_one(repo):
    result = run(repo, "--gpus", "4", "--gpus-per-switch", "2", "--nvme", "3")
    graph = result.graph
    ends = {(e.component, e.port) for link in graph.links.values() for e in link.ends}
    assert {("nvme0", "host"), ("switch0", "down2"), ("switch1", "down2"),
            ("switch0", "down3")} <= ends
    plain = run(repo, "--nvme", "2")
    ends = {(e.component, e.port) for link in plain.graph.links.values() for e in link.ends}
    assert {("host", "pcie1"), ("host", "pcie2"), ("gpu0.dma", "nvme1"), ("nvme1", "dma0")} \
        <= ends


def test_the_drive_takes_its_presets_figures_and_link(repo):
    result = run(repo, "--nvme", "1", "--nvme-preset", "micron9550")
    drive = result.simulation.components["nvme0"]
    figures = SSDS["micron9550"].figures()
    assert drive.params["capacity"] == figures["capacity"]
    assert drive.write.capacity == figures["write_bandwidth"]
    assert drive.d2h.capacity == PCIeLink(5, 4).effective
    record = result.results["nvme0"]
    assert record.link == "pcie5x4" and record.model.startswith("Micron 9550")


def test_the_vdnn_baseline_offloads_to_its_own_copy_of_the_drives(repo):
    result = run(repo, "--nvme", "1", "--offload-to", "nvme", baselines=True)
    sim = result.simulation.components
    assert sim["vdnn.nvme0"].write.busy_units > 0
    assert sim["nvme0"].write.busy_units > 0
    assert "oracle.nvme0" not in sim


def test_sst_info_lists_the_drive_its_ports_and_statistics(repo):
    out = subprocess.run([sys.executable, "-m", "sst_cdma.tools.cli.sst_info", "cdma.NVMe"],
                         capture_output=True, text=True, cwd=repo, timeout=60).stdout
    for word in ("NVMe", "queue_depth", "write_bandwidth", "dma%d", "StorageDrive",
                 "bytes_written", "peak_stored_bytes"):
        assert word in out, word


HAND_WIRED = """
import sst

gpu = sst.Component("gpu", "cdma.GPU")
gpu.addParams({"gpu_preset": "pascal", "offload_to": "nvme"})
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 16, "policy": "conv"})
hbm = sst.Component("hbm", "cdma.HBM")
hbm.addParams({"bandwidth": "732GB/s", "capacity": "16GiB"})
dma = sst.Component("dma", "cdma.CDMAEngine")
dma.addParam("nvme_path", "PATH")
link = sst.Component("slot", "cdma.PCIeBridge")
rc = sst.Component("rc", "cdma.RootComplex")
host = sst.Component("dram", "cdma.HostMemory")
sst.Link("l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("l_slot", "0ps").connect((dma, "pcie"), (link, "gpu"))
sst.Link("l_rc", "0ps").connect((link, "host"), (rc, "down0"))
sst.Link("l_host", "0ps").connect((rc, "host"), (host, "pcie0"))
if DRIVE:
    ssd = sst.Component("ssd", "cdma.NVMe")
    sst.Link("l_ssd", "0ps").connect((ssd, "host"), (rc, "down1"))
    sst.Link("l_ssd_dma", "0ps").connect((dma, "nvme0"), (ssd, "dma0"))
sst.Component("report", "cdma.Reporter")
"""


@pytest.mark.parametrize("path", ["gds", "bounce"])
def test_a_hand_wired_drive_on_the_root_complex(run_script, path):
    result, _ = run_script(HAND_WIRED.replace("DRIVE", "True").replace("PATH", path))
    sim = result.simulation.components
    moved = sim["dma"].transfers
    total = sum(t[3] for t in moved)
    assert sim["ssd"].write.busy_units + sim["ssd"].read.busy_units == pytest.approx(total)
    rc = sim["rc"].d2h.busy_units + sim["rc"].h2d.busy_units
    # gds turns at the root complex, below its bandwidth to host memory; bounce crosses it
    # once on the GPU's side and once on the drive's
    assert rc == (0 if path == "gds" else pytest.approx(2 * total))


def test_an_engine_without_a_drive_refuses_a_transfer_to_the_nvme_tier(run_script):
    from sst_cdma.engine.runner import RunError

    with pytest.raises(RunError, match="dma: offload of '.*' goes to the nvme tier, and no "
                                       "SSD is wired to this engine's nvme0 port"):
        run_script(HAND_WIRED.replace("DRIVE", "False").replace("PATH", "gds"))


def test_the_summary_reports_the_drives_and_matches_the_schema(repo):
    from components.summary_schema import check_summary

    result = run(repo, "--nvme", "2", "--offload-to", "nvme", "--nvme-path", "gds",
                 "--gpus", "2", baselines=True)
    summary = result.reports["summary"]
    assert check_summary(summary) == []
    nvme = summary["nvme"]
    sim = result.simulation.components
    assert nvme["drives"] == 2 and nvme["path"] == "gds" and nvme["link"] == "pcie4x4"
    assert nvme["bytes_written"] == pytest.approx(summary["wire_bytes"])
    assert nvme["peak_stored_bytes"] == sim["nvme0"].peak + sim["nvme1"].peak
    assert nvme["capacity_bytes"] == 2 * SSDS["micron7450"].figures()["capacity"]
    # the baseline's drives are its own, not the main system's
    assert sim["vdnn.nvme0"].write.busy_units > 0
    assert "nvme" not in run(repo).reports["summary"]


def test_a_stream_places_each_offload_on_its_own_tier(repo, tmp_path):
    from workloads import parse_stream, render_stream

    text = render_stream("alexnet", 16, "float32", "conv")
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("offload "))
    lines[first] += " tier=nvme"
    tensor = lines[first].split()[1]
    stream = parse_stream("\n".join(lines) + "\n", "s")
    assert [op.tier for op in stream.ops if op.name == tensor and
            op.op in ("offload", "prefetch")] == ["nvme", "nvme"]
    path = tmp_path / "mixed.stream"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = sst_cdma.run(repo / "topologies" / "pascal_cdma.py",
                          ["--no-baselines", "--workload", str(path), "--nvme", "1",
                           "--algorithm", "none"], console=io.StringIO())
    sim = result.simulation.components
    nbytes = stream.tensors[tensor].bytes
    assert sim["nvme0"].write.busy_units == nbytes and sim["nvme0"].read.busy_units == nbytes
    assert sim["host"].peak == sum(t.bytes for t in (stream.tensors[op.name] for op in
                                                      stream.ops if op.op == "offload")) - nbytes


def test_a_stream_naming_another_tier_is_refused_at_its_line():
    from workloads import StreamError, parse_stream, render_stream

    lines = render_stream("alexnet", 16, "float32", "conv").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("offload "))
    lines[first] += " tier=disk"
    with pytest.raises(StreamError, match=rf"s:{first + 1}: .*tier=disk must be host or nvme"):
        parse_stream("\n".join(lines) + "\n", "s")


def test_functional_mode_checks_real_bytes_that_went_to_the_drives(repo, tmp_path):
    import numpy as np
    from workloads import parse_stream, render_stream

    stream = parse_stream(render_stream("alexnet", 1, "float32", "conv"), "s")
    rng = np.random.default_rng(7)
    arrays = {}
    for op in stream.ops:
        if op.op == "offload":
            shape = stream.tensors[op.name].shape
            x = np.abs(rng.standard_normal(shape)).astype(np.float32)
            x[rng.random(shape) < 0.6] = 0.0
            arrays[op.name] = x
    path = tmp_path / "tensors.npz"
    np.savez(path, **arrays)
    result = sst_cdma.run(repo / "topologies" / "pascal_cdma.py",
                          ["--no-baselines", "--network", "alexnet", "--batch", "1",
                           "--policy", "conv", "--tensors", str(path), "--functional",
                           "--nvme", "2", "--offload-to", "nvme"], console=io.StringIO())
    summary = result.reports["summary"]
    assert summary["functional_checks"] == summary["functional_matches"] == len(arrays)
    sim = result.simulation.components
    # every checked prefetch was released from both drives; the host pool saw nothing
    assert sim["nvme0"].in_use == sim["nvme1"].in_use == 0
    assert sim["nvme0"].peak > 0 and sim["host"].peak == 0


def test_chunk_mode_moves_the_same_bytes_to_the_drives_no_faster_than_flows(repo):
    opts = ("--nvme", "1", "--offload-to", "nvme", "--algorithm", "zvc", "--no-contention")
    flow = run(repo, *opts)
    chunk = run(repo, *opts, "--mode", "chunk", "--burst", "1MiB", "--buffer", "4MiB")
    for a, b in zip(flow.simulation.components["gpu0.dma"].transfers,
                    chunk.simulation.components["gpu0.dma"].transfers):
        assert a[:4] == b[:4]
        # bursts add the pipeline's fill, one burst through the first stage: a few us
        assert 0 <= (b[5] - b[4]) - (a[5] - a[4]) <= 0.02 * (a[5] - a[4])
    assert chunk.simulation.components["nvme0"].write.busy_units == pytest.approx(
        flow.simulation.components["nvme0"].write.busy_units)


def test_each_host_has_its_own_drives_and_its_gpus_reach_only_those(repo):
    result = sst_cdma.run(repo / "topologies" / "pascal_cdma.py",
                          ["--no-baselines", *SMALL, "--gpus", "4", "--gpus-per-host", "2",
                           "--nvme", "1", "--offload-to", "nvme", "--simulate-every-node"],
                          console=io.StringIO(), run_mode="init")
    ends = {(e.component, e.port): link.name for link in result.graph.links.values()
            for e in link.ends}
    assert ("host0.nvme0", "dma1") in ends and ("host1.nvme0", "dma1") in ends
    peers = {}
    for link in result.graph.links.values():
        a, b = link.ends
        peers[(a.component, a.port)] = b.component
        peers[(b.component, b.port)] = a.component
    assert [peers[(f"gpu{i}.dma", "nvme0")] for i in range(4)] == \
        ["host0.nvme0", "host0.nvme0", "host1.nvme0", "host1.nvme0"]
    assert peers[("host1.nvme0", "host")] == "host1"
