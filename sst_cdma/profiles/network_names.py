"""The tensors a network has, to check the names a density profile or a samples file gives.

A transformer's tensors depend on its attention form (``--attention naive`` has
``blk{i}/scores``, ``probs`` and ``context``; ``fused`` has ``blk{i}/attn``), and the shipped
transformer profiles cover both forms so that one profile serves either run
(:data:`~sst_cdma.profiles.derive.ATTENTION_FORMS`): a name is the network's when it is a
tensor of the network under any attention form. A name that is no tensor of it (a typo, a
profile of another version of the network) is refused, with the closest names.
"""
from __future__ import annotations

import difflib
import functools
from typing import Iterable, Mapping, Optional

from sst_cdma.model.attention import TENSOR_LAYOUTS
from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.schema import tensor_path

__all__ = ["network_tensor_shapes", "check_known_tensors"]



@functools.lru_cache(maxsize=32)
def network_tensor_shapes(network: str) -> Optional[Mapping[str, Optional[tuple[int, ...]]]]:
    """Tensor name -> one sample's shape (batch left out) of every tensor ``network`` has
    under any attention form; the shape is None where the run's options set it (a
    transformer's sequence length). None when ``network`` is no network definition this
    process can load (a workload given as a stream)."""
    from workloads import load_network
    from workloads.errors import WorkloadError

    try:
        net = load_network(network)
    except (WorkloadError, OSError):
        return None
    out: dict[str, Optional[tuple[int, ...]]] = {
        name: tuple(t.shape[1:]) for name, t in net.tensors(1).items()}
    for form in TENSOR_LAYOUTS:
        try:
            other = load_network(network, attention=form)
        except WorkloadError:  # a CNN has no attention form: its shapes are fixed
            return out
        if other is not net:  # the definition's own form: its tensors are in already
            out.update((name, None) for name in other.tensors(1))
    return {name: None for name in out}  # a transformer: shapes follow --seq-len


def _closest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_known_tensors(names: Iterable[str], network: str, where: str,
                        what: str = "tensor") -> None:
    """:class:`ProfileError` (``where``: the file) naming the first of ``names`` that
    ``network`` does not have, with the closest name it has and how many more are unknown.
    Nothing is checked when the network cannot be loaded (:func:`network_tensor_shapes`)."""
    known = network_tensor_shapes(network)
    if known is None:
        return
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    more = f"; {len(unknown) - 1} more {what}s are not the network's either" \
        if len(unknown) > 1 else ""
    label = tensor_path(unknown[0]) if what == "tensor" else f"{what} {unknown[0]!r}"
    raise ProfileError(f"{where}: {label}: network {network!r} has no such tensor"
                       f"{_closest(unknown[0], known)}{more}")
