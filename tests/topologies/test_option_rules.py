"""Who decides what: the workload element says whether it needs a host CPU and the builder
wires what it says; a rule between one element's params is the element's, so a hand-built
graph meets it too (in params' words); rules that span elements are declared beside the model
options and name what they relate."""
from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Optional

import pytest

import sst_cdma
from components.network_workload import NetworkWorkload
from sst_cdma.builder.model_options import ELEMENT_OPTIONS
from sst_cdma.builder.option_rules import RULES, STREAM_RULES, TOPOLOGY
from sst_cdma.builder.topology import option_parser
from sst_cdma.engine.config import ConfigGraph
from sst_cdma.engine.library import find_element
from sst_cdma.engine.runner import RunError, execute_script

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"

#: optimizer, optimizer_states, weights, gradients, policy: None where the option is not given
CHOICES = ((None, "sgd", "adam"), (None, "gpu", "host"), (None, "gpu"), (None, "gpu"),
           (None, "auto"))
FLAGS = ("--optimizer", "--optimizer-states", "--weights", "--gradients", "--policy")


def graph(*opts: str) -> ConfigGraph:
    """The graph pascal_cdma.py builds for ``opts`` without baselines (not run)."""
    return execute_script(PASCAL, ["--network", "alexnet", "--batch", "4", "--no-baselines",
                                   *opts])


def workload_params(g: ConfigGraph) -> dict[str, str]:
    """The params the builder gave gpu0's workload element, as given."""
    sub = next(s for s in g.components["gpu0"].subcomponents if s.slot == "workload")
    assert sub.type == "cdma.NetworkWorkload"
    return dict(sub.params)


@pytest.mark.parametrize("choice", list(itertools.product(*CHOICES)))
def test_the_host_cpu_is_there_exactly_where_the_workload_element_needs_one(choice):
    opts = [word for flag, value in zip(FLAGS, choice) if value for word in (flag, value)]
    g = graph(*opts)
    optimizer, states, weights, gradients, policy = choice
    # off the GPU, the host CPU steps the states; with none placed, Adam's planner may
    expected = states == "host" or (policy == "auto" and optimizer == "adam"
                                    and states is weights is gradients is None)
    cpus = [c for c in g.components.values() if c.type == "cdma.HostCPU"]
    assert len(cpus) == (1 if expected else 0)
    params = workload_params(g)
    values = NetworkWorkload.validate_params(params, where="gpu0:workload[0]")
    assert NetworkWorkload.needs_host_cpu(values) is expected
    planned = policy == "auto" and optimizer == "adam" and states is weights is gradients is None
    assert NetworkWorkload.plans_states(values) is planned
    assert params.get("plan_states") == ("host" if planned else None)
    # the GPU's model-state driver (its ``model_states`` slot) holds the link to the CPU
    assert ("cpu" in {e.port for link in g.links.values() for e in link.ends
                      if e.component == "gpu0:model_states[0]"}) is expected


@pytest.mark.parametrize("opts,bucket", [
    (("--optimizer", "adam", "--optimizer-states", "host"), "8MiB"),
    (("--optimizer", "adam", "--policy", "auto"), "8MiB"),  # the planner may step on the host
    (("--optimizer", "adam", "--policy", "auto", "--weights", "gpu", "--gpus", "2",
      "--data-parallel"), None),  # the all-reduce's buckets only
])
def test_a_bucket_size_sizes_the_host_cpus_buckets_where_the_element_has_one(opts, bucket):
    params = workload_params(graph(*opts, "--bucket-size", "8MiB"))
    assert params.get("gradient_bucket") == bucket


def test_the_element_decides_from_its_own_params_alone():
    values = NetworkWorkload.validate_params({"network": "alexnet", "optimizer": "adam",
                                              "policy": "auto", "plan_states": "nvme"}, "w")
    assert NetworkWorkload.plans_states(values) and NetworkWorkload.needs_host_cpu(values)
    values = NetworkWorkload.validate_params({"network": "alexnet", "optimizer": "sgd",
                                              "policy": "auto", "plan_states": "nvme"}, "w")
    assert not NetworkWorkload.plans_states(values)  # the planner prices Adam's step alone
    assert not NetworkWorkload.needs_host_cpu(values)
    stream = find_element("cdma.StreamWorkload")
    assert not stream.needs_host_cpu(stream.validate_params({"file": "x.stream"}, "w"))


HAND = """import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams({{"network": "alexnet",
                                                                   "batch": 8}})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
dma = sst.Component("gpu0.dma", "cdma.CDMAEngine")
dma.addParams({params})
link = sst.Component("gpu0.pcie", "cdma.PCIeBridge")
host = sst.Component("host", "cdma.HostMemory")
sst.Link("a", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("b", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("c", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("d", "0ps").connect((dma, "pcie"), (link, "gpu"))
sst.Link("e", "0ps").connect((link, "host"), (host, "pcie0"))
"""


@pytest.mark.parametrize("params,fault", [
    ({"mode": "chunk", "burst": "64KiB", "buffer": "32KiB"},
     "gpu0.dma (cdma.CDMAEngine): buffer=32KiB is smaller than one burst (64KiB): the staging "
     "buffer must hold a burst"),
    ({"burst": "8MiB"},  # the buffer's default is the one too small
     "gpu0.dma (cdma.CDMAEngine): buffer=4MiB is smaller than one burst (8MiB)"),
    ({"functional": True},
     "gpu0.dma (cdma.CDMAEngine): functional=true needs tensors: functional mode moves and "
     "checks real tensors' bytes"),
])
def test_a_hand_built_engine_meets_its_own_rules_in_params_words(tmp_path, params, fault):
    script = tmp_path / "hand.py"
    script.write_text(HAND.format(params=params), encoding="utf-8")
    with pytest.raises(RunError) as err:
        sst_cdma.run(script, console=io.StringIO())
    text = str(err.value)
    assert fault in text and "\n" not in text and "--" not in text


def _option(element: str, param: str) -> Optional[str]:
    """The flag that sets ``param`` of ``element``: an element option's, or the topology's own
    option of that destination."""
    if element == TOPOLOGY:
        dests = {a.dest: a.option_strings[0] for a in option_parser("t")._actions}
        return dests.get(param)
    return next((o.flag for o in ELEMENT_OPTIONS if (o.element, o.param) == (element, param)),
                None)


def test_every_rule_relates_params_an_option_sets():
    assert RULES
    for rule in (*RULES, *STREAM_RULES):
        assert len(rule.params) >= 2
        for element, param in rule.params:
            assert _option(element, param) is not None, (element, param)


def test_the_options_of_elements_a_run_does_not_build_come_from_their_declarations():
    relates = {rule.params[0] for rule in (*RULES, *STREAM_RULES)}
    for opt in ELEMENT_OPTIONS:
        if opt.element in ("cdma.HostCPU", "cdma.NVSwitch", "cdma.NetworkWorkload",
                           "cdma.FittedKernels", "cdma.MeasuredKernels"):
            assert (opt.element, opt.param) in relates, opt.flag
