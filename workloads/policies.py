"""Per-tensor memory policies: what happens to each activation tensor between its forward
production and its backward use — ``keep`` it resident, ``offload`` it as a plain copy,
``compress`` it through the cDMA engine's codec on the way out, or ``recompute`` it in the
backward pass from its producer's inputs.

A *policy* names these choices for a whole network (docs/workloads.md, "Per-tensor policies"):

* the vDNN policies ``none``, ``all``, ``conv`` (:data:`VDNN_POLICIES`), scheduled as before;
* ``recompute``: full recomputation per block. For a transformer every tensor of block i but
  its output ``blk{i}/res2`` (the next block's input) is recomputed; for a CNN, which has no
  blocks, every tensor a memory-bound layer produces (pool, LRN, batchnorm, concat, add, ...:
  the ``cheap`` group) is recomputed and the convolution and FC outputs are kept;
* terms ``CHOICE-GROUP`` joined by ``+``, applied left to right over ``keep``:
  ``recompute-attn`` (Megatron's selective recomputation of the attention core),
  ``recompute-attn+offload-ffn``, ``compress-all``, ... (:data:`GROUPS`);
* ``plan``: a per-tensor plan file (JSON object tensor -> choice; :func:`load_plan_file`);
* ``auto``: the planner picks (:mod:`workloads.planner`).

The network input (the data layer's tensor) has no kernel to recompute it: groups skip it and
a plan file that recomputes it is refused.
"""
from __future__ import annotations

import os
import re
from typing import Callable, Mapping

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.model.element_params import network_word
from sst_cdma.model.policies import VDNN_POLICIES  # scheduled by vdnn.plan_iteration as vDNN does

from .errors import WorkloadError, read_fault
from .network import LayerInfo, Network, TensorInfo
from .transformer import split_name

__all__ = ["CHOICES", "VDNN_POLICIES", "GROUPS", "POLICY_RE", "check_policy", "is_vdnn",
           "resolve_choices", "load_plan_file", "split_block", "group_members"]

#: What can happen to one activation tensor.
CHOICES = ("keep", "offload", "compress", "recompute")
#: Policies that are not terms: a per-tensor plan file and the automatic planner.
SPECIAL = ("plan", "auto")
#: a plan file (or a whole summary.json holding a plan): a choice per tensor
PLAN_FILE = FileKind("a plan file", 512 * MIB)
#: The syntax of a policy name (the stream header's ``policy=`` too).
POLICY_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*(\+[a-z][a-z0-9]*(-[a-z0-9]+)*)*$")

_ATTN_CORE = frozenset({"scores", "probs", "context", "attn"})
_ATTENTION = _ATTN_CORE | {"qkv", "rope", "proj"}
_FFN = frozenset({"fc1", "act", "fc2"})
_NORM = frozenset({"ln1", "ln2"})
_RESIDUAL = frozenset({"res1", "res2"})
_EXPENSIVE = frozenset({"conv", "fc", "linear", "data"})


def split_block(name: str) -> tuple[int | None, str]:
    """``blk3/qkv`` -> (3, "qkv"); a name outside the blocks -> (None, name) (the shared
    transformer naming convention, :func:`~workloads.transformer.split_name`)."""
    return split_name(name)


def _role(t: TensorInfo) -> str:
    return split_block(t.name)[1]


def _in_block(t: TensorInfo) -> bool:
    return split_block(t.name)[0] is not None


#: Tensor groups a policy term can name: group -> (what it is, membership test).
GROUPS: dict[str, tuple[str, Callable[[TensorInfo, LayerInfo, Mapping[str, str]], bool]]] = {
    "attn": ("the attention core: scores, probs, context (naive) or attn (fused)",
             lambda t, p, k: _in_block(t) and _role(t) in _ATTN_CORE),
    "attention": ("every attention tensor: qkv, rope, the core and proj",
                  lambda t, p, k: _in_block(t) and _role(t) in _ATTENTION),
    "ffn": ("fc1, act, fc2", lambda t, p, k: _in_block(t) and _role(t) in _FFN),
    "norm": ("ln1, ln2 (and ln_f)",
             lambda t, p, k: (_in_block(t) and _role(t) in _NORM) or t.name == "ln_f"),
    "residual": ("res1, res2", lambda t, p, k: _in_block(t) and _role(t) in _RESIDUAL),
    "block": ("every block tensor but the block output res2 (full recomputation per block)",
              lambda t, p, k: _in_block(t) and _role(t) != "res2"),
    "cheap": ("tensors of memory-bound layers: every producer but conv, fc, linear, data",
              lambda t, p, k: p.kind not in _EXPENSIVE and not _in_block(t)
              or (_in_block(t) and _role(t) in _NORM | _RESIDUAL | {"act", "probs", "rope"})),
    "conv": ("tensors a convolution reads (vDNN-conv's offload unit)",
             lambda t, p, k: any(k[c] == "conv" for c in t.consumers)),
    "all": ("every activation tensor", lambda t, p, k: True),
}


def is_vdnn(policy: str) -> bool:
    """True for the whole-network vDNN policies (``none``, ``all``, ``conv``)."""
    return policy in VDNN_POLICIES


def _terms(policy: str) -> list[tuple[str, str]]:
    """The (choice, group) terms of a term policy; raises WorkloadError naming the bad term."""
    if not POLICY_RE.match(policy):
        raise WorkloadError("bad syntax (expected none, all, conv, recompute, auto, "
                            "plan or CHOICE-GROUP terms joined by '+', e.g. "
                            "recompute-attn+offload-ffn)")
    terms = policy.split("+")
    if len(terms) > 1 and any(t in VDNN_POLICIES + SPECIAL for t in terms):
        raise WorkloadError(f"{', '.join(VDNN_POLICIES + SPECIAL)} do not combine with other "
                            "terms")
    out = []
    for term in terms:
        if term == "recompute":
            out.append(("recompute", ""))  # the network's full recomputation
            continue
        choice, _, group = term.partition("-")
        if choice not in CHOICES or group not in GROUPS:
            raise WorkloadError(
                f"unknown term {term!r} (a term is CHOICE-GROUP with CHOICE "
                f"one of {', '.join(CHOICES)} and GROUP one of {', '.join(GROUPS)}, or "
                "'recompute')")
        out.append((choice, group))
    return out


def check_policy(policy: str) -> None:
    """Raise WorkloadError if ``policy`` is not a policy name (without looking at a network)."""
    if policy in VDNN_POLICIES or policy in SPECIAL:
        return
    _terms(policy)


def group_members(network: Network, batch: int, dtype: str, group: str) -> list[str]:
    """The tensors of ``network`` in ``group`` (the network input excluded), forward order."""
    infos = {i.name: i for i in network.infer(batch, dtype)}
    kinds = {name: i.kind for name, i in infos.items()}
    test = GROUPS[group][1]
    return [t.name for t in network.tensors(batch, dtype).values()
            if infos[t.producer].kind != "data" and test(t, infos[t.producer], kinds)]


def resolve_choices(network: Network, batch: int, dtype: str, policy: str,
                    plan: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every activation tensor of ``network`` -> its choice under term policy ``policy`` (or,
    for ``plan``, under the per-tensor ``plan``; tensors it leaves out are kept). The vDNN
    policies and ``auto`` are not resolved here."""
    tensors = network.tensors(batch, dtype)
    choices = {t: "keep" for t in tensors}
    if policy == "plan":
        if plan is None:
            raise WorkloadError(f"policy 'plan' needs a plan file ({network_word('plan', 'FILE')})")
        choices.update(plan)
        return choices
    if is_vdnn(policy) or policy == "auto":
        raise WorkloadError(f"policy {policy!r} is not a per-tensor term policy" + (
            ": the planner needs a machine (GPU memory, host link, codec); run a topology "
            f"with {network_word('policy', 'auto')}" if policy == "auto" else ""))
    transformer = any(_in_block(t) for t in tensors.values())
    for choice, group in _terms(policy):
        if not group:
            group = "block" if transformer else "cheap"
        members = group_members(network, batch, dtype, group)
        if not members:
            raise WorkloadError(f"policy {policy!r}: network {network.name} has no tensor in "
                                f"group {group!r} ({GROUPS[group][0]})", file=network.file)
        for name in members:
            choices[name] = choice
    return choices


def load_plan_file(path: str | os.PathLike[str], network: Network, batch: int,
                   dtype: str) -> dict[str, str]:
    """Read a per-tensor plan file: a JSON object tensor -> choice (:data:`CHOICES`, or
    ``free``, which summary.json reports for a tensor no backward kernel reads: read as
    ``recompute``, so a summary's ``plan.tensors`` is a plan file, and so is a whole
    ``summary.json`` with a ``plan``). An unknown tensor or
    choice, a recomputed network input or a file that is not such an object raises
    WorkloadError naming the file (and the tensor)."""
    file = os.fspath(path)
    try:
        data = load_json(file, PLAN_FILE, finite=False)  # a summary.json is a plan file too
    except FileReadError as exc:
        raise WorkloadError(f"not a JSON plan file ({exc})" if exc.parsing else
                            read_fault(exc, "plan file"), file=file) from None
    if isinstance(data, dict) and isinstance(data.get("plan"), dict):
        if data.get("network", network.name) != network.name:
            raise WorkloadError(f"the plan of a {data['network']} run, not {network.name}",
                                file=file)
        data = data["plan"]  # a whole summary.json
    elif isinstance(data, dict) and "iteration_time_s" in data:
        raise WorkloadError("a summary.json without a 'plan' (a run of several GPUs has one "
                            "per GPU, under 'gpus')", file=file)
    if isinstance(data, dict) and isinstance(data.get("tensors"), dict):
        data = data["tensors"]  # a summary's plan object, or {"tensors": {...}}
    if not isinstance(data, dict):
        raise WorkloadError("a plan file is a JSON object mapping tensor names to "
                            f"{', '.join(CHOICES)}", file=file)
    tensors = network.tensors(batch, dtype)
    infos = {i.name: i for i in network.infer(batch, dtype)}
    out: dict[str, str] = {}
    for name, choice in data.items():
        if name not in tensors:
            raise WorkloadError(f"tensor {name!r}: no such activation tensor in network "
                                f"{network.name}", file=file)
        if choice == "free":
            choice = "offload" if infos[tensors[name].producer].kind == "data" else "recompute"
        if choice not in CHOICES:
            raise WorkloadError(f"tensor {name!r}: unknown choice {choice!r} (expected one of "
                                f"{', '.join(CHOICES)}, or free)", file=file)
        if choice != "keep" and not tensors[name].consumers:
            raise WorkloadError(f"tensor {name!r}: no layer reads it after its producer, so "
                                f"there is nothing to {choice} (only keep applies)", file=file)
        if choice == "recompute" and infos[tensors[name].producer].kind == "data":
            raise WorkloadError(f"tensor {name!r}: the network input cannot be recomputed",
                                file=file)
        out[name] = choice
    return out
