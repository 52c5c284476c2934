"""Numbers out of any sensible range (issue #24): each is refused with one line naming the
option, param or file, before anything is simulated."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError
from workloads.errors import WorkloadError
from workloads.loader import load_network

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"


def refused(opts: list[str], **kwargs) -> str:
    """The one-line refusal of a pascal_cdma.py run."""
    with pytest.raises(RunError) as err:
        sst_cdma.run(PASCAL, opts, console=io.StringIO(), **kwargs)
    text = str(err.value)
    assert "\n" not in text, text
    return text


def test_a_capacity_past_a_64_bit_address_space_is_refused():
    text = refused(["--network", "alexnet", "--no-baselines"],
                   overrides={"gpu0.hbm": {"capacity": "1e400B"}})
    assert "gpu0.hbm (cdma.HBM): parameter 'capacity': '1e400B' is more than 2**64 B" in text


def test_a_workspace_of_5000_digits_is_refused_naming_the_option():
    text = refused(["--network", "alexnet", "--no-baselines", "--workspace", "9" * 5000])
    assert "model option error: --workspace: '9999" in text
    assert "the number has 5000 characters (at most 100)" in text


@pytest.mark.parametrize("option", ["--codec-unit-throughput", "--sm-compress-throughput",
                                    "--sm-decompress-throughput"])
def test_an_implausibly_slow_codec_is_refused_naming_the_option(option):
    text = refused(["--network", "alexnet", "--no-baselines", option, "1e-30B/s"])
    assert f"argument {option}: '1e-30B/s' must be >= 1e+06 B/s" in text


def test_a_network_of_data_layers_only_is_refused(tmp_path):
    net = tmp_path / "only.yaml"
    net.write_text("name: only\nlayers:\n  - {name: data, kind: data, params: {shape: [3, 8, 8]}}"
                   "\n", encoding="utf-8")
    assert "has data layers only: nothing to compute" in refused(["--network", str(net)])


def test_a_transformer_of_a_million_blocks_is_refused(tmp_path):
    text = (REPO / "workloads" / "networks" / "gpt2_small.yaml").read_text(encoding="utf-8")
    path = tmp_path / "deep.yaml"
    path.write_text(re.sub(r"(\n\s+layers:) \d+", r"\1 1000000", text), encoding="utf-8")
    with pytest.raises(WorkloadError, match=re.escape(
            "transformer field 'layers': 1000000 blocks is more than the 1024 this simulator "
            "takes")):
        load_network(path)


def test_more_gpus_than_the_memory_holds_is_refused_up_front(monkeypatch):
    import resource

    from sst_cdma.builder.topology import GPU_MEMORY_BYTES, available_memory

    have = available_memory()
    assert have is not None and have > 0
    gpus = have // GPU_MEMORY_BYTES + 1
    text = refused(["--network", "alexnet", "--gpus", str(gpus)])
    assert re.search(rf"--gpus {gpus} needs at least [\d.]+ GiB of memory \(about 0\.7 MiB per "
                     r"simulated GPU, baselines included\), more than the "
                     rf"{have / 2**30:.1f} GiB this process may use", text), text
    # under an address-space limit (ulimit -v), the limit is what the process may use
    monkeypatch.setattr(resource, "getrlimit", lambda what: (2 << 30, resource.RLIM_INFINITY))
    assert available_memory() == min(have, 2 << 30)
    text = refused(["--network", "alexnet", "--gpus", "4000"])
    assert "--gpus 4000 needs at least 2.7 GiB" in text and "more than the 2.0 GiB" in text
