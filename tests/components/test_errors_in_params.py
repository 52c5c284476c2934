"""Errors in the caller's words: a topology script that fills the elements by hand reads the
params it set (``optimizer_states=host``); ``sst topologies/pascal_cdma.py -- ...`` reads the
flags its user typed (``--optimizer-states host``), from the same checks."""
from __future__ import annotations

import json

import pytest

from sst_cdma.engine.param_words import param_word, speak_flags
from sst_cdma.engine.runner import RunError, run
from sst_cdma.tools.cli.sst_main import main as sst_main

#: a P100 system wired by hand (as topologies/hand_wired_p100.py), the workload's and the
#: fitted kernels' params given
WIRED = '''import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.addParam("gpu_preset", "pascal")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams({workload})
gpu.setSubComponent("kernels", "cdma.FittedKernels").addParams({kernels})
hbm = sst.Component("hbm", "cdma.HBM")
hbm.addParams({{"bandwidth": "732GB/s", "capacity": "16GiB"}})
engine = sst.Component("engine", "cdma.CDMAEngine")
link = sst.Component("slot", "cdma.PCIeBridge")
dram = sst.Component("dram", "cdma.HostMemory")
sst.Link("a", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("b", "0ps").connect((gpu, "dma"), (engine, "gpu"))
sst.Link("c", "0ps").connect((engine, "hbm"), (hbm, "dma"))
sst.Link("d", "0ps").connect((engine, "pcie"), (link, "gpu"))
sst.Link("e", "0ps").connect((link, "host"), (dram, "pcie0"))
'''

#: (the workload's params, the fitted kernels' params, the same fault as options, what a
#: script reads, what ``sst`` reads)
FAULTS = [
    ({"optimizer_states": "host"}, {}, ["--optimizer-states", "host"],
     "optimizer_states=host runs the optimizer step on the host CPU, whose throughput is "
     "measured for Adam: it needs optimizer=adam, not 'none'",
     "--optimizer-states host runs the optimizer step on the host CPU, whose throughput is "
     "measured for Adam: it needs --optimizer adam, not 'none'"),
    ({"weights": "host"}, {}, ["--weights", "host"],
     "weights=host: the update kernels on the GPU read and write the weights; with the "
     "weights off the GPU the host CPU steps them, which needs optimizer_states=host or nvme",
     "--weights host: the update kernels on the GPU read and write the weights; with the "
     "weights off the GPU the host CPU steps them, which needs --optimizer-states host or "
     "nvme"),
    ({}, {"tf32": "all"}, ["--tf32", "all"],
     "tf32=all: GPU preset 'pascal' has no TF32",
     "--tf32 all: GPU preset 'pascal' has no TF32"),
    ({"network": "gpt2_small", "attention": "flash3"}, {}, ["--network", "gpt2_small",
                                                            "--attention", "flash3"],
     "attention=flash3: GPU preset 'pascal' does not run FlashAttention-3",
     "--attention flash3: GPU preset 'pascal' does not run FlashAttention-3"),
]
IDS = ["optimizer_states", "weights", "tf32", "attention"]


def _refusal(path, *args: str) -> str:
    with pytest.raises(RunError) as err:
        run(path, list(args), stop_at="1us")
    return str(err.value)


@pytest.mark.parametrize("workload, kernels, options, by_hand, by_flags", FAULTS, ids=IDS)
def test_a_script_reads_the_params_it_set(write_script, workload, kernels, options, by_hand,
                                          by_flags):
    params = {"network": "alexnet", "batch": 1, **workload}
    text = _refusal(write_script(WIRED.format(workload=json.dumps(params),
                                              kernels=json.dumps(kernels))))
    assert by_hand in text and "--" not in text, text


@pytest.mark.parametrize("workload, kernels, options, by_hand, by_flags", FAULTS, ids=IDS)
def test_sst_reads_the_flags_of_the_same_fault(capsys, workload, kernels, options, by_hand,
                                              by_flags):
    code = sst_main(["pascal_cdma.py", "--stop-at", "1us", "--", "--network", "alexnet",
                     "--batch", "1", *options])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert by_flags in err and by_hand.split(":")[0] not in err, err


HOST_CPU = '''import sst
cpu = sst.Component("cpu", "cdma.HostCPU")
cpu.addParams({"adam_throughput": 1e8, "adam_file": "nothing.json"})
dram = sst.Component("dram", "cdma.HostMemory")
sst.Link("l", "0ps").connect((cpu, "memory"), (dram, "cpu"))
'''


def test_a_host_cpu_filled_by_hand_names_its_params(write_script, capsys):
    text = _refusal(write_script(HOST_CPU))
    assert "cpu (cdma.HostCPU): adam_throughput contradicts adam_file: each sets the CPU's " \
           "Adam rate; give one" in text
    code = sst_main(["pascal_cdma.py", "--", "--network", "alexnet", "--batch", "1",
                     "--optimizer", "adam", "--optimizer-states", "host",
                     "--cpu-adam-throughput", "1e8", "--cpu-adam-file", "nothing.json"])
    err = capsys.readouterr().err
    assert code == 1 and "cpu (cdma.HostCPU): --cpu-adam-throughput contradicts " \
                         "--cpu-adam-file: each sets" in err, err


def test_a_param_the_topology_sets_from_another_option_is_named_by_that_flag():
    from sst_cdma.builder.model_options import flag_words

    assert param_word("cdma.NetworkWorkload", "gradient_bucket", 10) == "gradient_bucket=10"
    speak_flags(flag_words())
    assert param_word("cdma.NetworkWorkload", "gradient_bucket", 10) == "--bucket-size 10"


def test_the_params_of_the_element_in_a_slot_are_named_by_the_slot():
    """A codec filling the engine's ``codec`` slot names its params by the slot
    (``cdma.CDMAEngine:codec``), whose interface declares them for every codec."""
    from sst_cdma.builder.model_options import flag_words

    assert param_word("cdma.CDMAEngine:codec", "codec_units", 4) == "codec_units=4"
    speak_flags(flag_words())
    assert param_word("cdma.CDMAEngine:codec", "codec_units", 4) == "--codec-units 4"
    assert param_word("cdma.CDMAEngine:codec", "engine", "blackwell-de") == \
        "--engine blackwell-de"


def test_the_element_types_the_model_names_are_the_elements():
    from components.kernel_times import FittedKernels
    from components.network_workload import NetworkWorkload
    from sst_cdma.model.element_params import FITTED_KERNELS, NETWORK_WORKLOAD

    assert NETWORK_WORKLOAD == NetworkWorkload.type_name()
    assert FITTED_KERNELS == FittedKernels.type_name()
