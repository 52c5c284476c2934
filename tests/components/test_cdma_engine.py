"""The cDMA engine: wire sizes from density profiles and from real tensors, functional mode
moving real compressed bytes through host memory and checking them bit for bit."""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from progress_lines import without_progress

import sst_cdma
from sst_cdma import codecs
from sst_cdma.engine.runner import RunError
from workloads import parse_stream, render_stream

TOPOLOGY = "topologies/pascal_cdma.py"


def run(repo, *opts):
    return sst_cdma.run(repo / TOPOLOGY, ["--no-baselines", *opts], console=io.StringIO())


def offloaded_tensors(network, batch, policy="conv"):
    stream = parse_stream(render_stream(network, batch, "float32", policy), "s")
    return [stream.tensors[op.name] for op in stream.ops if op.op == "offload"]


def test_zvc_wire_bytes_follow_the_profile_density(repo):
    result = run(repo, "--network", "alexnet", "--batch", "8", "--algorithm", "zvc")
    engine = result.simulation.components["gpu0.dma"]
    from sst_cdma.profiles import load_profile

    profile = load_profile("alexnet")
    for t in offloaded_tensors("alexnet", 8):
        density = profile.density(t.name, 0.5) if t.sparse else 1.0
        ratio = 32 / (1 + 32 * density)   # mask word per 32 elements + the non-zeros
        # dense data would grow, so the engine sends it raw
        expected = t.bytes if ratio <= 1 else math.ceil(t.bytes / ratio)
        assert engine.wire[t.name] == expected, t.name
    summary = result.reports["summary"]
    assert summary["wire_bytes"] < summary["offloaded_bytes"]
    assert summary["compression_ratio"] == pytest.approx(
        summary["offloaded_bytes"] / summary["wire_bytes"])


def test_compression_speeds_up_a_link_bound_iteration(repo):
    plain = run(repo, "--network", "squeezenet", "--batch", "32", "--policy", "all",
                "--algorithm", "none").reports["summary"]["iteration_time_s"]
    zvc = run(repo, "--network", "squeezenet", "--batch", "32", "--policy", "all",
              "--algorithm", "zvc").reports["summary"]["iteration_time_s"]
    assert zvc < plain * 0.8


def test_few_slow_engines_become_the_bottleneck(repo):
    fast = run(repo, "--network", "vgg16", "--batch", "16", "--policy", "all")
    slow = run(repo, "--network", "vgg16", "--batch", "16", "--policy", "all", "--codec-units", "1",
               "--codec-unit-throughput", "2GB/s")
    assert slow.reports["summary"]["iteration_time_s"] > \
        1.2 * fast.reports["summary"]["iteration_time_s"]


def test_profile_missing_a_layer_is_named(repo, tmp_path):
    from sst_cdma.profiles import load_profile

    data = load_profile("alexnet").to_dict()
    del data["tensors"]["pool2"]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RunError, match="pool2"):
        run(repo, "--network", "alexnet", "--batch", "8", "--profile", str(path))


def test_a_profile_of_another_network_is_refused_naming_file_and_field(repo, tmp_path):
    from sst_cdma.profiles import load_profile

    data = load_profile("alexnet").to_dict()
    data["network"] = "vgg16"   # same tensor names would otherwise be taken at face value
    path = tmp_path / "vgg16_named.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RunError) as err:
        run(repo, "--network", "alexnet", "--batch", "8", "--profile", str(path))
    message = str(err.value)
    assert "\n" not in message
    assert message.endswith(f"{path}: gpu0.dma: network: the profile describes 'vgg16', not "
                            "'alexnet'")
    assert message.count(str(path)) == 1


@pytest.mark.parametrize("dtype,itemsize", [("float16", 2), ("bfloat16", 2)])
def test_float32_measured_ratios_are_not_reused_for_another_dtype(repo, dtype, itemsize):
    """The shipped digits profile is float32 and carries measured ratios; a float16 or
    bfloat16 run takes its densities and derives each ratio for its own element size."""
    from sst_cdma.model.compression import ratio_from_density
    from sst_cdma.profiles import load_profile

    profile = load_profile("digits_cnn")
    assert profile.dtype == "float32"
    result = run(repo, "--network", "digits_cnn", "--batch", "64", "--policy", "all",
                 "--algorithm", "zvc", "--progress", "1.0", "--dtype", dtype)
    engine = result.simulation.components["gpu0.dma"]
    for tensor in ("conv1", "conv2", "pool", "fc1"):
        density = profile.density(tensor, 1.0)
        assert engine.plan.densities[tensor] == density
        measured = profile.ratio(tensor, "zvc", 1.0)
        assert measured is not None
        assert engine.plan.ratios[tensor]["zvc"] == codecs.zvc_ratio(density, itemsize)
        assert engine.plan.ratios[tensor]["zvc"] < measured * 0.99  # fp16: 16/(1+16d) < 32/(1+32d)
        for algo in ("rle", "zlib"):
            assert engine.plan.ratios[tensor][algo] == ratio_from_density(algo, density, dtype)


@pytest.fixture
def real_tensors(tmp_path):
    rng = np.random.default_rng(7)
    arrays = {}
    for t in offloaded_tensors("alexnet", 1):
        shape = t.shape
        x = np.abs(rng.standard_normal(shape)).astype(np.float32)
        x[rng.random(shape) < 0.6] = 0.0
        arrays[t.name] = x
    path = tmp_path / "tensors.npz"
    np.savez(path, **arrays)
    return path, arrays


def test_functional_mode_moves_and_checks_real_bytes(repo, real_tensors):
    path, arrays = real_tensors
    result = run(repo, "--network", "alexnet", "--batch", "1", "--algorithm", "zvc",
                 "--tensors", str(path), "--functional")
    engine = result.simulation.components["gpu0.dma"]
    host = result.simulation.components["host"]
    assert set(engine.plan.payloads) == set(arrays)
    for name, array in arrays.items():
        assert engine.wire[name] == len(codecs.compress(array, "zvc"))
    prefetched = {t for d, t, *_ in engine.transfers if d == "prefetch"}
    assert prefetched and not (prefetched & {k.split("/")[-1] for k in host.payloads})


def test_functional_mode_counts_the_prefetches_it_checked(repo, real_tensors, tmp_path):
    path, arrays = real_tensors
    out = tmp_path / "out"
    console = io.StringIO()
    result = sst_cdma.run(repo / TOPOLOGY, ["--no-baselines", "--network", "alexnet",
                                            "--batch", "1", "--algorithm", "zvc", "--tensors",
                                            str(path), "--functional"],
                          output_directory=out, console=console)
    engine = result.simulation.components["gpu0.dma"]
    checked = [t for d, t, *_ in engine.transfers if d == "prefetch" and t in arrays]
    assert len(checked) == len(arrays) == 5  # every conv input comes back and is checked
    summary = json.loads((out / "summary.json").read_text())
    assert summary["functional_checks"] == summary["functional_matches"] == 5
    assert result.reports["summary"]["functional_checks"] == 5
    assert "functional:      5 prefetches checked bit for bit, all matched" in \
        console.getvalue().splitlines()
    stats = result.statistics.set_index("StatisticName")
    assert stats.loc["functional_checks", "Count.u64"] == 5
    assert stats.loc["functional_matches", "Sum.u64"] == 5


def test_several_gpus_add_up_their_functional_checks(repo, real_tensors):
    path, _ = real_tensors
    console = io.StringIO()
    result = sst_cdma.run(repo / TOPOLOGY, ["--no-baselines", "--network", "alexnet",
                                            "--batch", "1", "--algorithm", "zvc", "--tensors",
                                            str(path), "--functional", "--gpus", "2"],
                          console=console)
    summary = result.reports["summary"]
    assert [g["functional_checks"] for g in summary["gpus"]] == [5, 5]
    assert summary["functional_checks"] == summary["functional_matches"] == 10
    assert summary["aggregation"]["functional_checks"] == "sum"
    assert "functional:      10 prefetches checked bit for bit, all matched" in \
        console.getvalue().splitlines()


def test_functional_mode_counts_only_what_it_compressed(repo, real_tensors):
    # a plain copy engine moves no compressed stream: nothing is checked, and the line says so
    path, _ = real_tensors
    console = io.StringIO()
    result = sst_cdma.run(repo / TOPOLOGY, ["--no-baselines", "--network", "alexnet",
                                            "--batch", "1", "--algorithm", "none", "--tensors",
                                            str(path), "--functional"], console=console)
    summary = result.reports["summary"]
    assert summary["functional_checks"] == summary["functional_matches"] == 0
    assert "functional:      no prefetch checked" in console.getvalue()


def test_outside_functional_mode_there_is_no_functional_key(repo, real_tensors):
    path, _ = real_tensors
    console = io.StringIO()
    result = sst_cdma.run(repo / TOPOLOGY, ["--no-baselines", "--network", "alexnet",
                                            "--batch", "1", "--tensors", str(path)],
                          console=console)
    assert "functional_checks" not in result.reports["summary"]
    assert "functional:" not in console.getvalue()


def test_a_mismatch_is_counted_as_checked_and_not_matched(repo, real_tensors, monkeypatch):
    from components.cdma_engine import CDMAEngine

    path, _ = real_tensors
    engines = []
    init = CDMAEngine.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        engines.append(self)

    monkeypatch.setattr(CDMAEngine, "__init__", keep)
    plan = CDMAEngine.init

    def swap_one(self, phase):
        plan(self, phase)  # compresses the real pool2 ...
        if phase == 0 and "pool2" in self.plan.payloads:  # ... and compares what comes back
            self.sources.real["pool2"] = self.sources.real["pool2"] + 1.0  # with another

    monkeypatch.setattr(CDMAEngine, "init", swap_one)
    with pytest.raises(RunError, match="prefetch of 'pool2' returned data that differs"):
        run(repo, "--network", "alexnet", "--batch", "1", "--algorithm", "zvc", "--tensors",
            str(path), "--functional")
    engine = next(e for e in engines if e.name == "gpu0.dma")
    assert engine.functional_checks == engine.functional_matches + 1
    assert engine.functional_matches < 5


def test_functional_mode_catches_a_corrupted_host_copy(repo, real_tensors, monkeypatch):
    from components.host_memory import HostMemory

    path, _ = real_tensors
    original = HostMemory.load

    def flip(self, key):
        data = bytearray(original(self, key))
        data[-1] ^= 0x01
        return bytes(data)

    monkeypatch.setattr(HostMemory, "load", flip)
    with pytest.raises(RunError, match="corrupt compressed stream|differs"):
        run(repo, "--network", "alexnet", "--batch", "1", "--algorithm", "zvc", "--tensors",
            str(path), "--functional")


def test_functional_mode_needs_tensors(repo):
    with pytest.raises(RunError, match="--functional needs --tensors"):
        run(repo, "--network", "alexnet", "--batch", "1", "--functional")


def test_functional_mode_with_no_tensor_of_the_run_is_refused(repo, real_tensors, tmp_path):
    """Samples named unlike every compressed tensor (a typo: conv_1 for conv1) would leave
    nothing to check and a run that only looks functional."""
    _, arrays = real_tensors
    np.savez(tmp_path / "typo.npz", conv_1=arrays["conv1"] if "conv1" in arrays else
             next(iter(arrays.values())))
    with pytest.raises(RunError, match=r"functional mode has nothing to check: none of the 1 "
                                       r"tensors in .*typo.npz \(conv_1\) is one this run "
                                       r"compresses"):
        run(repo, "--network", "alexnet", "--batch", "1", "--algorithm", "zvc", "--tensors",
            str(tmp_path / "typo.npz"), "--functional")


def _one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


def test_real_tensors_of_another_batch_are_refused_naming_the_tensor(repo, real_tensors):
    path, _ = real_tensors   # alexnet at batch 1
    with pytest.raises(RunError) as err:
        run(repo, "--network", "alexnet", "--batch", "2", "--algorithm", "zvc",
            "--tensors", str(path), "--functional")
    text = _one_line(err)
    assert f"{path}: tensor 'data': shape [1, 3, 227, 227] does not match the simulated " \
           f"tensor's [2, 3, 227, 227] (batch 1, not 2)" in text, text


def test_real_tensors_of_another_dtype_are_refused_naming_the_tensor(repo, real_tensors):
    path, _ = real_tensors
    with pytest.raises(RunError) as err:
        run(repo, "--network", "alexnet", "--batch", "1", "--dtype", "float16",
            "--tensors", str(path), "--functional")
    assert f"{path}: tensor 'data': element type float32, but the run simulates float16" \
        in _one_line(err)


def test_samples_recorded_for_another_network_are_refused(repo, real_tensors, tmp_path):
    from sst_cdma.profiles import save_samples

    _, arrays = real_tensors
    index = save_samples(tmp_path / "s", arrays, network="digits_cnn")
    with pytest.raises(RunError) as err:
        run(repo, "--network", "alexnet", "--batch", "1", "--tensors", str(tmp_path / "s"),
            "--functional")
    assert f"{index}: network: samples captured for 'digits_cnn', not 'alexnet'" \
        in _one_line(err)
    save_samples(tmp_path / "ok", arrays, network="alexnet")   # the right network runs
    run(repo, "--network", "alexnet", "--batch", "1", "--tensors", str(tmp_path / "ok"),
        "--functional")


def test_raw_bfloat16_words_run_functionally(repo, tmp_path):
    rng = np.random.default_rng(3)
    arrays = {}
    for t in offloaded_tensors("alexnet", 1):
        x = np.abs(rng.standard_normal(t.shape)).astype(np.float32)
        x[rng.random(t.shape) < 0.6] = 0.0
        arrays[t.name] = (x.view(np.uint32) >> 16).astype(np.uint16)   # bfloat16 bits
    path = tmp_path / "bf16.npz"
    np.savez(path, **arrays)
    result = run(repo, "--network", "alexnet", "--batch", "1", "--dtype", "bfloat16",
                 "--algorithm", "zvc", "--tensors", str(path), "--functional")
    engine = result.simulation.components["gpu0.dma"]
    for name, words in arrays.items():
        assert engine.wire[name] == len(codecs.compress(words, "zvc", element_type="bfloat16"))
    assert not result.simulation.components["host"].payloads   # every prefetch checked


def test_a_truncated_tensors_npz_is_one_line_naming_the_file(repo, real_tensors):
    path, _ = real_tensors
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(RunError) as err:
        run(repo, "--network", "alexnet", "--batch", "1", "--tensors", str(path),
            "--functional")
    assert f"{path}: not a readable .npz file" in _one_line(err)


def test_sst_exits_non_zero_with_one_line_for_mismatched_tensors(repo, real_tensors, capsys):
    from sst_cdma.tools.cli.sst_main import main

    path, _ = real_tensors
    status = main([str(repo / TOPOLOGY), "--", "--no-baselines", "--network", "alexnet",
                   "--batch", "2", "--tensors", str(path), "--functional"])
    err = capsys.readouterr().err
    assert status != 0
    line = without_progress(err)                     # a loaded machine's progress aside
    assert line.count("\n") == 1 and "tensor 'data'" in line and "(batch 1, not 2)" in line, err


def _digits_with_dense_data(tmp_path, ratios_by_dtype):
    """The shipped digits profile plus an entry for its dense input tensor ``data``."""
    from sst_cdma.profiles import load_profile

    doc = load_profile("digits_cnn").to_dict()
    doc["tensors"]["data"] = {"points": [
        {"progress": 0.0, "density": 0.7, "ratios_by_dtype": ratios_by_dtype}]}
    path = tmp_path / "digits_dense.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_measured_ratios_of_a_dense_tensor_are_used_in_their_dtype(repo, tmp_path):
    """A dense tensor (not post-ReLU) takes the profile's density and ratios where the profile
    measured them in the run's dtype; the sparse tensors are planned as before."""
    path = _digits_with_dense_data(tmp_path, {"bfloat16": {"zstd": 4.0, "lz4": 3.0}})
    opts = ["--network", "digits_cnn", "--batch", "64", "--policy", "all", "--progress", "1.0",
            "--dtype", "bfloat16"]
    plain = run(repo, *opts, "--algorithm", "zstd").simulation.components["gpu0.dma"]
    result = run(repo, *opts, "--algorithm", "zstd", "--profile", str(path))
    engine = result.simulation.components["gpu0.dma"]
    from sst_cdma.model.compression import ratio_from_density

    assert plain.plan.densities["data"] == 1.0
    assert engine.plan.densities["data"] == 0.7
    assert engine.plan.ratios["data"]["zstd"] == 4.0 and engine.plan.ratios["data"]["lz4"] == 3.0
    assert engine.plan.ratios["data"]["zvc"] == ratio_from_density("zvc", 0.7, "bfloat16")
    assert engine.wire["data"] == math.ceil(engine.plan.raw_bytes["data"] / 4.0)
    assert engine.wire["data"] < plain.wire["data"]
    for tensor in ("conv1", "conv2", "pool", "fc1"):
        assert engine.plan.ratios[tensor] == plain.plan.ratios[tensor]
        assert engine.wire[tensor] == plain.wire[tensor]


def test_dense_ratios_measured_in_another_dtype_are_not_used(repo, tmp_path):
    path = _digits_with_dense_data(tmp_path, {"bfloat16": {"zstd": 4.0}})
    result = run(repo, "--network", "digits_cnn", "--batch", "64", "--policy", "all",
                 "--algorithm", "zstd", "--dtype", "float16", "--profile", str(path))
    engine = result.simulation.components["gpu0.dma"]
    from sst_cdma.model.compression import ratio_from_density

    assert engine.plan.densities["data"] == 1.0
    assert engine.plan.ratios["data"]["zstd"] == ratio_from_density("zstd", 1.0, "float16")


def test_a_gelu_transformer_takes_its_shipped_profiles_dense_bfloat16_ratios(repo):
    """GPT-2 has no post-ReLU tensor; its derived profile's bfloat16 ratios (measured on the
    small GELU model) size every offloaded tensor the profile has, with no --profile given."""
    from sst_cdma.profiles import load_profile

    profile = load_profile("gpt2_small")
    result = run(repo, "--network", "gpt2_small", "--batch", "1", "--seq-len", "128",
                 "--policy", "all", "--dtype", "bfloat16", "--algorithm", "zstd")
    engine = result.simulation.components["gpu0.dma"]
    planned = [t for t in engine.plan.ratios if t in profile.tensors]
    assert "blk0/probs" in planned and "blk11/act" in planned
    for tensor in planned:
        assert engine.plan.densities[tensor] == profile.density(tensor, 0.5)
        assert engine.plan.ratios[tensor]["zstd"] == pytest.approx(
            profile.ratio(tensor, "zstd", 0.5, dtype="bfloat16"))
    # the causal softmax's zero upper triangle: ZVC pays there, not on GELU's output
    assert engine.plan.ratios["blk0/probs"]["zvc"] > 1.5 > 1.0 > engine.plan.ratios["blk11/act"]["zvc"]
