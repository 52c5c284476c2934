"""ConfigGraph.element_config finds a subcomponent in its owner's tree (where setSubComponent
names it, ``OWNER:SLOT[N]``), and one a graph file named otherwise in any component's."""
from __future__ import annotations

from sst_cdma.engine.config import ConfigComponent, ConfigGraph, ConfigSubComponent


def _graph() -> ConfigGraph:
    graph = ConfigGraph()
    for name in ("gpu0", "gpu1"):
        comp = ConfigComponent(name, "cdma.GPU")
        sub = ConfigSubComponent(f"{name}:workload[0]", "cdma.NetworkWorkload", slot="workload")
        sub.subcomponents.append(ConfigSubComponent(f"{name}:workload[0]:inner[0]", "x",
                                                    slot="inner"))
        comp.subcomponents.append(sub)
        graph.add_component(comp)
    graph.component("gpu1").subcomponents.append(  # type: ignore[union-attr]
        ConfigSubComponent("odd:kernels[0]", "cdma.FittedKernels", slot="kernels"))
    return graph


def test_subcomponents_are_found_at_any_depth_under_their_owner():
    graph = _graph()
    assert graph.element_config("gpu1:workload[0]").name == "gpu1:workload[0]"  # type: ignore[union-attr]
    assert graph.element_config("gpu0:workload[0]:inner[0]").type == "x"  # type: ignore[union-attr]
    assert graph.element_config("gpu0:kernels[0]") is None


def test_a_subcomponent_named_apart_from_its_owner_is_still_found():
    graph = _graph()
    assert graph.element_config("odd:kernels[0]").type == "cdma.FittedKernels"  # type: ignore[union-attr]
    assert graph.element_config("nowhere:slot[0]") is None
