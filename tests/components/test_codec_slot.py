"""The cDMA engine's codec is the subcomponent in its ``codec`` slot: one element per registered
codec, a hand-filled slot is the system ``build()`` makes, a wrong filling or a moved param is
one line, overrides reach the codec by its name, and the engine's cost query is pure."""
from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest

import sst_cdma
from components.codecs import Codec, codec_elements, element_type
from sst_cdma.codecs import registry
from sst_cdma.engine.library import find_element
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
SMALL = ["--network", "alexnet", "--batch", "8", "--no-baselines"]
FILLERS = ("a Codec (cdma.BplaneZstd, cdma.LZ4, cdma.RLE, cdma.ZVC, cdma.Zlib, cdma.Zstd)")

SYSTEM = """import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.addParam("gpu_preset", "pascal")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {{"network": "alexnet", "batch": 8, "policy": "conv"}})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
hbm.addParams({{"bandwidth": "732GB/s", "capacity": "16GiB"}})
dma = sst.Component("gpu0.dma", "cdma.CDMAEngine")
{codec}
link = sst.Component("gpu0.pcie", "cdma.PCIeBridge")
link.addParams({{"protocol": "pcie", "generation": 3, "lanes": 16}})
host = sst.Component("host", "cdma.HostMemory")
sst.Link("a", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("b", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("c", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("d", "0ps").connect((dma, "pcie"), (link, "gpu"))
sst.Link("e", "0ps").connect((link, "host"), (host, "pcie0"))
sst.Component("report", "cdma.Reporter")
"""


def run_system(tmp_path: Path, codec: str):
    script = tmp_path / "system.py"
    script.write_text(SYSTEM.format(codec=codec), encoding="utf-8")
    return sst_cdma.run(script, console=io.StringIO())


def test_every_registered_codec_has_an_element_in_the_slot_it_fills():
    elements = codec_elements()
    assert list(elements) == list(registry.algorithm_names())
    for algorithm, cls in elements.items():
        assert find_element(element_type(algorithm)) is cls
        assert issubclass(cls, Codec) and cls.ALGORITHM == algorithm
    assert element_type("zvc") == "cdma.ZVC" and element_type("bplane_zstd") == "cdma.BplaneZstd"


def test_a_codec_registered_later_gets_its_element_and_loses_it_when_unregistered():
    with registry.registered("toy", 200, "sst_cdma.codecs.deflate:ZLIB"):
        assert find_element("cdma.TOY").ALGORITHM == "toy"
    with pytest.raises(LookupError, match="unknown element 'cdma.TOY'"):
        find_element("cdma.TOY")


def test_a_hand_filled_codec_slot_is_the_system_build_makes(tmp_path):
    built = sst_cdma.run(PASCAL, [*SMALL, "--algorithm", "rle", "--codec-units", "4"],
                         console=io.StringIO())
    hand = run_system(tmp_path, 'codec = dma.setSubComponent("codec", "cdma.RLE")\n'
                                'codec.addParam("codec_units", 4)')
    assert hand.reports["summary"] == built.reports["summary"]
    engine = hand.simulation.components["gpu0.dma"]
    assert engine.codec.name == "gpu0.dma:codec[0]" and engine.codec.algorithm == "rle"
    assert engine.codec.resource.capacity == 4 * 32e9
    assert hand.reports["summary"]["codec_units"] == 4


def test_an_empty_slot_is_the_plain_copy_engine_of_algorithm_none(tmp_path):
    built = sst_cdma.run(PASCAL, [*SMALL, "--algorithm", "none"], console=io.StringIO())
    hand = run_system(tmp_path, "")
    assert hand.reports["summary"] == built.reports["summary"]
    summary = hand.reports["summary"]
    assert summary["algorithm"] == "none" and summary["wire_bytes"] == summary["offloaded_bytes"]
    # the system's shape reads as a default codec's, as it always did
    assert (summary["codec_units"], summary["codec_unit_throughput_Bps"]) == (8, 32e9)
    assert "gpu0.dma.codec" not in hand.simulation.components["gpu0.dma"].flows.resources


def test_the_vdnn_baseline_engine_has_no_codec():
    result = sst_cdma.run(PASCAL, ["--network", "alexnet", "--batch", "8"],
                          console=io.StringIO())
    components = result.simulation.components
    assert components["gpu0.dma"].codec.algorithm == "zvc"
    assert components["vdnn.gpu0.dma"].codec is None


@pytest.mark.parametrize("codec, words", [
    ('dma.setSubComponent("codec", "cdma.HBM")',
     f"gpu0.dma (cdma.CDMAEngine): slot 'codec' takes {FILLERS}; cdma.HBM is a component, "
     "not a subcomponent"),
    ('dma.setSubComponent("codec", "testElement.UpTally")',
     f"gpu0.dma (cdma.CDMAEngine): slot 'codec' takes {FILLERS}, not testElement.UpTally "
     "(a Tally)"),
    ('dma.setSubComponent("codec", "cdma.ZVC", 1)',
     "gpu0.dma (cdma.CDMAEngine): slot 'codec' takes one subcomponent, in slot number 0"),
    ('dma.setSubComponent("zvc", "cdma.ZVC")',
     "gpu0.dma (cdma.CDMAEngine) has no subcomponent slot 'zvc' (slots: codec)"),
    ('dma.addParam("algorithm", "zvc")',
     "gpu0.dma (cdma.CDMAEngine): parameter 'algorithm' is the codec slot's now: fill it with "
     "setSubComponent('codec', 'cdma.ZVC')"),
    ('dma.addParam("codec_units", 4)',
     "gpu0.dma (cdma.CDMAEngine): parameter 'codec_units' is the codec's now: set it on the "
     "subcomponent in slot 'codec'"),
    ('dma.addParams({"codec_unit_throughput": "8GB/s"})',
     "parameter 'codec_unit_throughput' is the codec's now"),
    ('dma.addParam("bypass_incompressible", "false")',
     "parameter 'bypass_incompressible' is the codec's now"),
])
def test_a_wrong_filling_or_a_moved_param_is_one_line(tmp_path, codec, words):
    with pytest.raises(RunError) as err:
        run_system(tmp_path, codec)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_codec_element_in_another_components_slot_is_refused(tmp_path):
    script = tmp_path / "meter.py"
    script.write_text('import sst\nm = sst.Component("m", "testElement.Meter")\n'
                      'm.setSubComponent("tally", "cdma.ZVC")\n', encoding="utf-8")
    with pytest.raises(RunError) as err:
        sst_cdma.run(script, console=io.StringIO())
    assert "m (testElement.Meter): slot 'tally' takes a Tally (" in str(err.value)
    assert "not cdma.ZVC (a Codec)" in str(err.value)


def test_overrides_reach_the_codec_by_its_name_or_a_pattern():
    fast = sst_cdma.run(PASCAL, [*SMALL, "--codec-unit-throughput", "4GB/s"],
                        console=io.StringIO()).reports["summary"]
    for pattern in ("gpu0.dma:codec[0]", "*.dma:codec*"):
        over = sst_cdma.run(PASCAL, SMALL, console=io.StringIO(),
                            overrides={pattern: {"codec_unit_throughput": "4GB/s"}})
        assert over.reports["summary"] == fast, pattern


@pytest.mark.parametrize("overrides, words", [
    ({"*.dma": {"codec_unit_throughput": "4GB/s"}},
     "param override: gpu0.dma (cdma.CDMAEngine): parameter 'codec_unit_throughput' is the "
     "codec's now"),
    ({"*:codec*": {"codec_unitz": 3}},
     "param override: gpu0.dma:codec[0] (cdma.ZVC): unknown parameter 'codec_unitz' (did you "
     "mean 'codec_units'"),
    ({"*:kodec*": {"codec_units": 3}}, "param override: no component matches '*:kodec*'"),
    ({"gpu0.dma:codec[0]": {"codec_units": 0}},
     "param override: gpu0.dma:codec[0] (cdma.ZVC): parameter 'codec_units': 0 must be >= 1"),
])
def test_a_bad_override_of_the_codec_is_one_line(overrides, words):
    with pytest.raises(RunError) as err:
        sst_cdma.run(PASCAL, SMALL, console=io.StringIO(), overrides=overrides)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_codec_options_and_overrides_contradict_algorithm_none():
    with pytest.raises(RunError, match="--codec-units contradicts --algorithm none"):
        sst_cdma.run(PASCAL, [*SMALL, "--algorithm", "none", "--codec-units", "4"],
                     console=io.StringIO())
    with pytest.raises(RunError, match=r"no component matches '\*.dma:codec\*'"):
        sst_cdma.run(PASCAL, [*SMALL, "--algorithm", "none"], console=io.StringIO(),
                     overrides={"*.dma:codec*": {"codec_units": 4}})


def _observable(engine) -> dict:
    """Everything of the engine's state a run or a later query could see."""
    path = engine.path
    return {"plan": copy.deepcopy(engine.plan), "wire": dict(engine.wire),
            "sources": engine.sources, "hbm": engine.hbm_resource,
            "path": (list(path.d2h), list(path.h2d), path.latency_ps, list(path.link_names),
                     path.host),
            "resources": {n: r.capacity for n, r in engine.flows.resources.items()},
            "run": (list(engine.transfers), list(engine.copies), len(engine.queue), engine.busy,
                    engine.functional_checks, engine.functional_matches)}


@pytest.mark.parametrize("opts", [[], ["--algorithm", "none"], ["--mode", "chunk"]])
def test_the_cost_query_is_a_pure_function_of_the_manifest(opts):
    """Asking changes nothing in the engine, and asking twice gives the same answer."""
    from components.messages import MovedTensor, OffloadManifest

    result = sst_cdma.run(PASCAL, [*SMALL, "--policy", "all", *opts], console=io.StringIO())
    engine = result.simulation.components["gpu0.dma"]
    sparse = next(t for t, d in engine.plan.densities.items() if d < 0.5)
    raw = engine.plan.raw_bytes[sparse]
    manifest = OffloadManifest("gpu0", "alexnet", "float32", 8, (
        MovedTensor(sparse, raw, True), MovedTensor("fresh", 1 << 20, False, plain=True)))
    before = _observable(engine)
    first = engine.transfer_costs(manifest)
    assert _observable(engine) == before
    assert engine.transfer_costs(manifest) == first
    if opts == ["--algorithm", "none"]:
        assert [c.wire_bytes for c in first.values()] == [raw, 1 << 20]
        assert first[sparse].packed_out_ps == first[sparse].plain_out_ps
    else:
        # priced as the codec would move it, the tensor the workload copies raw too
        assert first[sparse].wire_bytes == engine.wire[sparse] < raw
        assert first["fresh"].wire_bytes <= 1 << 20
        assert first[sparse].packed_out_ps < first[sparse].plain_out_ps
