"""The oracle and vDNN baselines of any cDMA system: :func:`add_baselines` copies the main
system a topology script wired, by hand or with :func:`sst_cdma.builder.topology.build`, into the two
systems every summary compares it with. It names the cdma element types and params it
changes, so it belongs to the element library, not to the engine.

- **oracle**: each main GPU with its GPU memory only, nothing offloaded (its workload's policy
  ``none``) and memory that never runs out: the iteration time training would take on a GPU
  big enough.
  Data-parallel GPUs keep their NVLink fabric (the component on their ``nvlink`` ports), so
  the oracle reduces its gradients as the main system does.
- **vdnn**: the whole main system (GPUs, memories, engines, links, switches, host memories)
  with each GPU's workload at the same offload policy (``conv`` where the main system offloads
  nothing) and every engine copying without compression (its ``codec`` slot empty): vDNN as
  published.

Copies are named ``oracle.NAME`` and ``vdnn.NAME`` (their subcomponents
``oracle.NAME:SLOT[N]``) and carry the originals' params, subcomponents, links, latencies and
statistic enables, so a param changed in the main system is changed in both
baselines. A GPU's ``system`` param says which system it belongs to; reports pair the k-th GPU
of each baseline with the k-th main GPU, in declaration order.
"""
from __future__ import annotations

import copy
from dataclasses import field
from typing import Optional

import networkx as nx

from sst_cdma.engine.config import (ConfigComponent, ConfigError, ConfigGraph, ConfigLink,
                             ConfigSubComponent, LinkEndConfig)
from sst_cdma.engine.config_api import caller_location, current_graph
from sst_cdma.engine.records import Record, record

__all__ = ["add_baselines", "BaselinesFollow", "GPU_TYPE", "ENGINE_TYPE"]

#: the element types whose params the baselines change
GPU_TYPE = "cdma.GPU"
#: the element of a GPU's workload slot the baselines can change (a stream file's ops are its
#: own: no oracle or vDNN run can be derived from it)
NETWORK_TYPE = "cdma.NetworkWorkload"
ENGINE_TYPE = "cdma.CDMAEngine"
MEMORY_TYPE = "cdma.HBM"
#: the GPU port of the GPU-to-GPU fabric the oracle keeps
FABRIC_PORT = "nvlink"
#: the engine's slot of compression units, which vDNN's engines leave empty
CODEC_SLOT = "codec"
#: the workload params placing model states, as the oracle has them: on its GPU
ORACLE_STATES = {"optimizer_states": "gpu", "weights": "gpu", "gradients": "gpu",
                 "delayed_update": "0", "state_compression": "none"}


def _param(comp: ConfigComponent, name: str) -> str:
    """The param's text as configured, else its declared default."""
    if name in comp.params:
        return comp.params[name]
    for decl in comp.element.PARAMS:
        if decl.name == name:
            return str(decl.default)
    raise KeyError(name)


def _without_codec(engine: ConfigComponent) -> ConfigComponent:
    """An engine's configuration with its ``codec`` slot emptied: a plain copy engine."""
    plain = copy.copy(engine)
    plain.subcomponents = [s for s in engine.subcomponents if s.slot != CODEC_SLOT]
    return plain


def _peers(graph: ConfigGraph) -> dict[tuple[str, str], tuple[str, ConfigLink]]:
    """(component, port) -> the component wired there and the link doing it."""
    out: dict[tuple[str, str], tuple[str, ConfigLink]] = {}
    for link in graph.links.values():
        if len(link.ends) == 2:
            a, b = link.ends
            out[(a.component, a.port)] = (b.component, link)
            out[(b.component, b.port)] = (a.component, link)
    return out


def _copy_link(graph: ConfigGraph, link: ConfigLink, prefix: str, where: str) -> None:
    clone = ConfigLink(prefix + link.name, link.latency, no_cut=link.no_cut, where=where)
    for end in link.ends:
        graph.add_link_end(clone, LinkEndConfig(prefix + end.component, end.port, end.latency),
                           where)


def _workload(gpu: ConfigComponent, where: str) -> ConfigSubComponent:
    """The network workload in ``gpu``'s workload slot, whose params the baselines change."""
    sub = next((s for s in gpu.subcomponents if s.slot == "workload"), None)
    if sub is None:
        raise ConfigError(f"add_baselines: GPU {gpu.name!r} has no workload: fill its "
                          f"'workload' slot first (setSubComponent('workload', "
                          f"{NETWORK_TYPE!r}))", where)
    if sub.type != NETWORK_TYPE:
        raise ConfigError(f"add_baselines: GPU {gpu.name!r} runs a {sub.type} workload: the "
                          "oracle (the same iteration with nothing offloaded) and the vDNN "
                          f"baseline are rendered from a network ({NETWORK_TYPE})", where)
    return sub


def _renamed(comp: ConfigComponent, prefix: str, where: str) -> None:
    """``comp`` (a copy) and its subcomponents under their names with ``prefix``."""
    comp.name = prefix + comp.name
    comp.where = where
    for sub in comp.subcomponents:
        _renamed(sub, prefix, where)


def _set(comp: ConfigComponent, params: dict[str, str], where: str) -> None:
    comp.params.update(params)
    comp.param_where.update({k: where for k in params})


def _copy_component(graph: ConfigGraph, comp: ConfigComponent, prefix: str,
                    params: dict[str, str], where: str,
                    workload: Optional[dict[str, str]] = None) -> None:
    """A copy of ``comp`` named with ``prefix``, with ``params`` changed (and ``workload``,
    the params changed in a GPU's workload subcomponent)."""
    clone = copy.deepcopy(comp)
    _renamed(clone, prefix, where)
    _set(clone, params, where)
    if workload is not None:
        _set(_workload(clone, where), workload, where)
    graph.add_component(clone)


def _copy_links(graph: ConfigGraph, members: set[str], prefix: str, where: str) -> None:
    """Copy every link between two of ``members`` (a link on a subcomponent's port, such as
    the model-state driver's, belongs to its component)."""
    for link in list(graph.links.values()):
        if len(link.ends) == 2 and all(graph.owner(end.component) in members
                                       for end in link.ends):
            _copy_link(graph, link, prefix, where)


def add_baselines(oracle: bool = True, vdnn: bool = True) -> None:
    """Add the oracle and/or vDNN copies of the main system configured so far (see the
    module's docstring). Call it once, after the main system is wired and before statistics
    are enabled for all components (or after: copies keep the enables their originals had)."""
    where = caller_location()
    graph = current_graph()
    comps = graph.components
    gpus = [c for c in comps.values() if c.type == GPU_TYPE]
    if not gpus:
        raise ConfigError(f"add_baselines: no {GPU_TYPE} component is configured yet: wire the "
                          "main system first", where)
    taken = sorted(c.name for c in gpus if _param(c, "system") != "main")
    if taken:
        raise ConfigError(f"add_baselines: GPU {taken[0]!r} already belongs to a baseline "
                          "system: add the baselines once", where)
    members: set[str] = set()
    for gpu in gpus:
        if gpu.name not in members:
            members |= nx.node_connected_component(graph.graph, gpu.name)
    ordered = [c for c in comps.values() if c.name in members]
    for gpu in gpus:
        _workload(gpu, where)
    graph.final_checks.append(BaselinesFollow.of(gpus, where))
    if oracle:
        _add_oracle(graph, gpus, where)
    if vdnn:
        for comp in ordered:
            params: dict[str, str] = {}
            workload = None
            if comp.type == GPU_TYPE:
                policy = _param(_workload(comp, where), "policy")
                params = {"system": "vdnn"}
                workload = {"policy": policy if policy != "none" else "conv",
                            "write_stream": "0"}
                if "state_compression" in _workload(comp, where).params:
                    workload["state_compression"] = "none"  # vDNN's engines have no codec
            elif comp.type == ENGINE_TYPE:
                comp = _without_codec(comp)
            _copy_component(graph, comp, "vdnn.", params, where, workload)
        _copy_links(graph, members, "vdnn.", where)


def _add_oracle(graph: ConfigGraph, gpus: list[ConfigComponent], where: str) -> None:
    """Each GPU with its memory: nothing offloaded, memory that never runs out."""
    peers = _peers(graph)
    for gpu in gpus:
        peer = peers.get((gpu.name, "hbm"))
        if peer is None:
            raise ConfigError(f"add_baselines: GPU {gpu.name!r} has no memory on its 'hbm' "
                              "port", where)
        memory = graph.component(peer[0])
        if memory is None:
            raise ConfigError(f"add_baselines: GPU {gpu.name!r}'s 'hbm' port is linked to "
                              f"{peer[0]!r}, which is not a component", where)
        # the oracle keeps every model state on its GPU (only where the main run moved one)
        placed = {k: v for k, v in ORACLE_STATES.items() if k in _workload(gpu, where).params}
        _copy_component(graph, gpu, "oracle.", {"system": "oracle"}, where,
                        {"policy": "none", "plan": "", "write_stream": "0", **placed})
        _copy_component(graph, memory, "oracle.",
                        {"unlimited": "1"} if memory.type == MEMORY_TYPE else {}, where)
        _copy_link(graph, peer[1], "oracle.", where)
    fabric = [peers[(gpu.name, FABRIC_PORT)] for gpu in gpus if (gpu.name, FABRIC_PORT) in peers]
    for name in dict.fromkeys(name for name, _ in fabric):
        _copy_component(graph, graph.component(name), "oracle.", {}, where)  # type: ignore[arg-type]
    for _, link in fabric:
        _copy_link(graph, link, "oracle.", where)


#: workload params each system sets for itself (the policy studied, the oracle's none and
#: vDNN's, the plan and the stream written): a copy may differ from the main GPU's in these
OWN_WORKLOAD_PARAMS = ("policy", "plan", "write_stream")


@record
class BaselinesFollow(Record):
    """The main GPUs' workload params as :func:`add_baselines` copied them, checked again before
    the run. Changing the main GPU's workload afterwards (a sweep's or ``sst``'s param override
    on ``gpu0:workload[0]``, an ``addParam`` after ``build()`` returned) without changing the
    copies would run the baselines on the old workload (VGG-16 "faster than the oracle"), so the
    run is refused. Hardware params may differ on purpose (``gpu*.hbm`` changes only the main
    system's memory) and are not checked."""

    where: str
    #: workload subcomponent name -> its params when copied
    params: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, gpus: list[ConfigComponent], where: str) -> "BaselinesFollow":
        """The snapshot of the workloads of ``gpus``."""
        return cls(where, {sub.name: dict(sub.params) for gpu in gpus
                           for sub in gpu.subcomponents if sub.slot == "workload"})

    def __call__(self, graph: ConfigGraph) -> None:
        """Raise ConfigError naming the first main-GPU workload param changed after the copies
        were made that some copy of it lacks."""
        for name, before in self.params.items():
            now = self._workload(graph, name)
            if now is None:
                continue
            for key in sorted(set(before) | set(now.params)):
                value = now.params.get(key)
                if key in OWN_WORKLOAD_PARAMS or value == before.get(key):
                    continue
                behind = [c for c in (self._workload(graph, prefix + name)
                                      for prefix in ("oracle.", "vdnn."))
                          if c is not None and c.params.get(key) != value]
                if behind:
                    self._refuse(now, key, value, behind[0], graph)

    @staticmethod
    def _workload(graph: ConfigGraph, name: str) -> Optional[ConfigComponent]:
        gpu = graph.component(name.split(":")[0])
        if gpu is None:
            return None
        return next((s for s in gpu.subcomponents if s.name == name), None)

    def _refuse(self, comp: ConfigComponent, key: str, value: Optional[str],
                behind: ConfigComponent, graph: ConfigGraph) -> None:
        how = comp.param_where.get(key) or "after the baselines were added"
        copies = " and ".join(repr(prefix + comp.name) for prefix in ("oracle.", "vdnn.")
                              if self._workload(graph, prefix + comp.name) is not None)
        raise ConfigError(f"{comp.name}: workload param {key!r} was set to {value!r} ({how}) "
                          f"after the oracle and vDNN baselines were copied from the main system "
                          f"({self.where}); {behind.name} still has {behind.params.get(key)!r}, "
                          f"so the baselines would run the old workload: set it before the "
                          f"baselines are added (the topology's model option), set it on "
                          f"{copies} too, or run without baselines", graph.source)
