"""The GPU's workload and kernel times are subcomponents in its slots: each slot filled by hand
gives what ``build()`` gives; a wrong filling, an empty workload slot, a slot filled twice and a
param the GPU no longer takes are each one line naming the component, the slot and what fills
it."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.tools.cli.sst_info import main as sst_info
from sst_cdma.model.gpus import GPUS
from sst_cdma.engine.runner import RunError
from sst_cdma.builder.topology import LINKS
from workloads import load_network
from workloads.layer_times import LayerTimes

REPO = Path(__file__).resolve().parents[2]
STREAM = REPO / "tests" / "data" / "golden" / "pascal-vdnn" / "gpu0.stream"
ALEX = ["--network", "alexnet", "--batch", "32", "--policy", "all"]
NETWORK = ('w = gpu.setSubComponent("workload", "cdma.NetworkWorkload")\n'
           'w.addParams({"network": "alexnet", "batch": 32, "policy": "all"})\n')
WORKLOADS = "a WorkloadSource (cdma.NetworkWorkload, cdma.PipelineStageWorkload, " \
            "cdma.StreamWorkload, cdma.SyntheticWorkload)"


def system(fill: str, baselines: bool = False) -> str:
    """The machine build() wires for one P100 (same names), its GPU's slots filled by
    ``fill``."""
    p100, link = GPUS["pascal"], LINKS["pcie3x16"]
    return f"""import sst
from components.baselines import add_baselines

gpu = sst.Component("gpu0", "cdma.GPU")
gpu.addParam("gpu_preset", "pascal")
{fill}
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
hbm.addParams({{"bandwidth": "{p100.dram_bandwidth}", "capacity": "{p100.dram_capacity}"}})
dma = sst.Component("gpu0.dma", "cdma.CDMAEngine")
dma.setSubComponent("codec", "cdma.ZVC")
pcie = sst.Component("gpu0.pcie", "cdma.PCIeBridge")
pcie.addParams({link!r})
host = sst.Component("host", "cdma.HostMemory")
sst.Link("gpu0.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("gpu0.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("gpu0.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("gpu0.l_pcie", "0ps").connect((dma, "pcie"), (pcie, "gpu"))
sst.Link("gpu0.l_host", "0ps").connect((pcie, "host"), (host, "pcie0"))
{"add_baselines()" if baselines else ""}
sst.Component("report", "cdma.Reporter")
"""


def summary(script: "str | Path", options: list[str]) -> dict:
    return sst_cdma.run(script, options, console=io.StringIO()).reports["summary"]


@pytest.fixture(scope="module")
def layer_times(tmp_path_factory) -> Path:
    """Made-up measured times for every AlexNet kernel at batch 32."""
    net = load_network("alexnet")
    layers = [layer.name for layer in net.layers if layer.kind != "data"]
    times = LayerTimes(net.name, 32, "float32", "a made-up device",
                       {name: {"fwd": (k + 1) * 10_500_000, "bwd": 2 * (k + 1) * 10_500_000}
                        for k, name in enumerate(layers)}, "test")
    path = tmp_path_factory.mktemp("times") / "t.json"
    times.write(path)
    return path


@pytest.mark.parametrize("case", ["fitted-by-default", "fitted", "roofline", "measured",
                                  "stream", "fitted-with-baselines"])
def test_each_slot_filled_by_hand_gives_what_build_gives(case, write_script, layer_times):
    kernels = {"fitted-by-default": "",
               "roofline": 'gpu.setSubComponent("kernels", "cdma.RooflineKernels")\n',
               "measured": 'gpu.setSubComponent("kernels", "cdma.MeasuredKernels").addParam('
                           f'"layer_times", {str(layer_times)!r})\n',
               "stream": 'gpu.setSubComponent("kernels", "cdma.RooflineKernels")\n'}.get(
        case, 'gpu.setSubComponent("kernels", "cdma.FittedKernels")\n')
    options = {"roofline": [*ALEX, "--kernel-model", "roofline"],
               "measured": [*ALEX, "--layer-times", str(layer_times)],
               "stream": ["--workload", str(STREAM)]}.get(case, ALEX)
    stream = f'gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", ' \
             f'{str(STREAM)!r})\n'
    workload = stream if case == "stream" else NETWORK
    baselines = case == "fitted-with-baselines"
    by_hand = summary(write_script(system(workload + kernels, baselines)), [])
    built = summary(REPO / "topologies" / "pascal_cdma.py",
                    options + ([] if baselines else ["--no-baselines"]))
    assert by_hand == built
    assert ("baselines" in by_hand) == baselines


@pytest.mark.parametrize("fill, words", [
    ('gpu.setSubComponent("workload", "cdma.FittedKernels")\n',
     f"gpu0 (cdma.GPU): slot 'workload' takes {WORKLOADS}, not cdma.FittedKernels "
     "(a KernelTimes)"),
    ('gpu.setSubComponent("kernels", "cdma.StreamWorkload")\n',
     "gpu0 (cdma.GPU): slot 'kernels' takes a KernelTimes (cdma.FittedKernels, "
     "cdma.MeasuredKernels, cdma.RooflineKernels), not cdma.StreamWorkload (a WorkloadSource)"),
    ('gpu.setSubComponent("kernels", "cdma.HBM")\n',
     "gpu0 (cdma.GPU): slot 'kernels' takes a KernelTimes (cdma.FittedKernels, "
     "cdma.MeasuredKernels, cdma.RooflineKernels); cdma.HBM is a component"),
    ("", f"gpu0 (cdma.GPU): slot 'workload' is empty; it needs {WORKLOADS}: "
         "setSubComponent('workload', TYPE)"),
    (NETWORK + 'gpu.setSubComponent("workload", "cdma.SyntheticWorkload")\n',
     "gpu0 (cdma.GPU): slot workload[0] is already filled (with cdma.NetworkWorkload, "),
    ('gpu.addParams({"network": "alexnet", "batch": 32})\n',
     "gpu0 (cdma.GPU): parameter 'network' belongs to the workload now: "
     "setSubComponent('workload', 'cdma.NetworkWorkload')"),
    ('gpu.addParam("workload", "x.stream")\n',
     "gpu0 (cdma.GPU): parameter 'workload' belongs to the workload now: "
     "setSubComponent('workload', 'cdma.StreamWorkload') (its param 'file')"),
    ('gpu.addParam("layer_times", "t.json")\n',
     "gpu0 (cdma.GPU): parameter 'layer_times' belongs to the kernels now: "
     "setSubComponent('kernels', 'cdma.MeasuredKernels')"),
    ('gpu.addParam("compute_efficiency", 0.5)\n',
     "gpu0 (cdma.GPU): parameter 'compute_efficiency' belongs to the kernels now: "
     "setSubComponent('kernels', 'cdma.FittedKernels', 'cdma.RooflineKernels' or "
     "'cdma.MeasuredKernels')"),
    ('gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", "x.stream")\n'
     'gpu.setSubComponent("kernels", "cdma.MeasuredKernels").addParam("layer_times", "t.json")\n',
     "gpu0:workload[0]: measured layer times (cdma.MeasuredKernels) apply to a rendered "
     "network; a workload stream carries its own time= keys"),
    ('gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", "x.stream")\n'
     'gpu.setSubComponent("kernels", "cdma.RooflineKernels")\nadd_baselines()\n',
     "add_baselines: GPU 'gpu0' runs a cdma.StreamWorkload workload: the oracle"),
])
def test_a_bad_filling_is_one_line_naming_the_gpu_and_the_slot(fill, words, write_script):
    with pytest.raises(RunError) as err:
        summary(write_script(system(fill)), [])
    message = str(err.value)
    assert words in message and "\n" not in message


def test_an_override_of_a_param_that_moved_names_its_slot():
    with pytest.raises(RunError, match=r"param override: gpu0 \(cdma.GPU\): parameter "
                                       r"'kernel_overhead' belongs to the kernels now"):
        sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", [*ALEX, "--no-baselines"],
                     console=io.StringIO(), overrides={"gpu0": {"kernel_overhead": "5us"}})


def test_sst_info_lists_the_gpus_slots_and_what_fills_them(capsys):
    assert sst_info(["cdma.GPU"]) == 0
    out = capsys.readouterr().out
    assert "workload: the iteration's workload stream" in out and "[WorkloadSource; required]" \
        in out
    assert "[KernelTimes; default cdma.FittedKernels]" in out
    assert "filled by: cdma.FittedKernels, cdma.MeasuredKernels, cdma.RooflineKernels" in out
    assert "filled by: cdma.NetworkWorkload, cdma.PipelineStageWorkload, " \
        "cdma.StreamWorkload, cdma.SyntheticWorkload" in out
    assert "p2p: ports to the neighbour pipeline stages" in out


def test_the_parallel_slots_name_their_elements_and_refuse_another_as_a_class_would():
    from sst_cdma.engine.element import SubComponentSlot
    from sst_cdma.engine.library import find_element, slot_interface, slot_refusal
    from components.gpu import GPU

    slots = {s.name: s for s in GPU.SLOTS}
    assert slots["p2p"].interface == "PipelinePorts"
    assert slot_interface(slots["p2p"]) is find_element("cdma.PipelinePorts")
    assert slot_interface(slots["collectives"]) is find_element("cdma.CollectivePort")
    by_class = SubComponentSlot("p2p", "", accepts=find_element("cdma.PipelinePorts"))
    for element in ("cdma.PipelinePorts", "cdma.CollectivePort", "cdma.ZVC"):
        cls = find_element(element)
        assert slot_refusal(slots["p2p"], "gpu0", cls) == slot_refusal(by_class, "gpu0", cls)
    assert slot_refusal(slots["p2p"], "gpu0", find_element("cdma.PipelinePorts")) is None
    assert "takes a PipelinePorts (cdma.PipelinePorts), not cdma.ZVC" in \
        slot_refusal(slots["p2p"], "gpu0", find_element("cdma.ZVC"))


def test_a_gpu_alone_loads_none_of_the_parallel_elements_modules():
    # in a process of its own: this one has loaded them all
    parallel = ["components.pipeline_p2p", "components.collective_ops",
                "components.collective_wait", "components.pipeline_report", "components.nic",
                "components.trace", "components.rank_twins", "workloads.state_planner"]
    code = ("import io, sys; from sst_cdma import run; "
            "r = run('topologies/pascal_cdma.py', [], console=io.StringIO()); "
            f"print(r.reports['summary']['complete'], [m for m in {parallel!r} "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.strip()
    assert out == "True []"
