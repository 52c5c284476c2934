"""The figures docs/workloads.md shows as markdown tables, worked out from the definitions.

:func:`networks_table` prints a CNN's parameters, multiply-adds, FLOPs and activations per
image; :func:`transformers_table` a transformer's per sequence (FLOPs with naive attention,
activations in bfloat16 with naive and fused attention); :func:`memory_table` the vDNN
schedules' peaks and offloaded bytes (``python -m sst_cdma.tools.workloads table`` and ``memory``)."""
from __future__ import annotations

from collections.abc import Sequence

from .errors import WorkloadError
from .loader import load_network
from .network import Network
from .render import iteration_stream
from .policies import VDNN_POLICIES
from .stats import StreamStats, stream_stats

__all__ = ["is_transformer", "markdown", "memory_table", "networks_table", "parse_case",
           "transformers_table"]

#: the vDNN policies that offload, least first (conv's offloads are a subset of all's): those
#: whose offloads :func:`memory_table` shows; with nothing offloaded first, those whose peaks
OFFLOAD_POLICIES = tuple(reversed([p for p in VDNN_POLICIES if p != "none"]))
MEMORY_POLICIES = ("none", *OFFLOAD_POLICIES)


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of ``header`` and ``rows`` (one line each, cells as given)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def is_transformer(net: Network) -> bool:
    """Whether ``net`` was generated from a ``transformer:`` definition (its layers have
    roles)."""
    return any(layer.role for layer in net.layers)


def _activation_bytes(net: Network, dtype: str) -> int:
    """Every feature map of one sample (the input's too), each once."""
    return sum(t.bytes for t in net.tensors(1, dtype).values())


def _flops(net: Network, dtype: str) -> tuple[int, int]:
    """Forward and backward FLOPs of one sample."""
    infos = net.infer(1, dtype)
    return sum(i.flops_fwd for i in infos), sum(i.flops_bwd for i in infos)


def _of_kind(names: Sequence[str], transformer: bool) -> list[Network]:
    """The networks called ``names``, refusing one of the other kind (CNN or transformer)."""
    nets = [load_network(name) for name in names]
    for net in nets:
        if is_transformer(net) != transformer:
            want = "transformer" if transformer else "CNN"
            raise WorkloadError(f"{net.name} is not a {want}: this table is of {want}s only")
    return nets


def networks_table(names: Sequence[str]) -> str:
    """The CNNs ``names``: parameters (millions), GMAC, forward / backward GFLOP and
    activations in MB (fp32), per image."""
    rows = []
    for net in _of_kind(names, transformer=False):
        fwd, bwd = _flops(net, "float32")
        rows.append((f"`{net.name}`", f"{net.param_count() / 1e6:.2f}M",
                     f"{net.macs() / 1e9:.3f}", f"{fwd / 1e9:.2f} / {bwd / 1e9:.2f}",
                     f"{_activation_bytes(net, 'float32') / 1e6:.1f}"))
    return markdown(("network", "params", "GMAC / image", "fwd / bwd GFLOP per image",
                     "activations MB / image (fp32)"), rows)


def transformers_table(names: Sequence[str]) -> str:
    """The transformers ``names`` at their definitions' sequence lengths: parameters,
    forward / backward TFLOP per sequence (naive attention) and activations in GB per
    sequence (bfloat16) with naive and with fused attention."""
    rows = []
    for net in _of_kind(names, transformer=True):
        naive = load_network(net.name, attention="naive")
        fused = load_network(net.name, attention="fused")
        fwd, bwd = _flops(naive, "bfloat16")
        seq_len = naive.sample_shape(naive.layers[0].name)[0]
        rows.append((f"`{net.name}`", f"{net.param_count():,}", str(seq_len),
                     f"{fwd / 1e12:.2f} / {bwd / 1e12:.2f}",
                     f"{_activation_bytes(naive, 'bfloat16') / 1e9:.2f} / "
                     f"{_activation_bytes(fused, 'bfloat16') / 1e9:.2f}"))
    return markdown(("network", "params", "seq_len", "fwd / bwd TFLOP per sequence (naive)",
                     "activations GB per sequence, bf16, naive / fused"), rows)


def parse_case(text: str) -> tuple[str, int]:
    """``NETWORK:BATCH`` as (network, batch); a bad batch is a :class:`WorkloadError`."""
    name, sep, batch = text.partition(":")
    if not sep or not name or not batch.isdigit() or int(batch) < 1:
        raise WorkloadError(f"case {text!r}: expected NETWORK:BATCH, a positive batch "
                            "(e.g. vgg16:128)")
    return name, int(batch)


def _memory_row(name: str, batch: int) -> tuple[str, ...]:
    stats: dict[str, StreamStats] = {
        p: stream_stats(iteration_stream(name, batch, "float32", p)) for p in MEMORY_POLICIES}
    cells = [f"{stats[p].peak_bytes / 1e9:.2f}" for p in MEMORY_POLICIES]
    cells += [f"{stats[p].offloaded_bytes / 1e9:.2f}" for p in OFFLOAD_POLICIES]
    cells.append(f"{stats['none'].declared_bytes / 1e9:.2f}")
    return (name, str(batch), *cells)


def memory_table(cases: Sequence[tuple[str, int]]) -> str:
    """Per (network, batch), fp32, ``liveness`` allocation, no optimizer step: the peak of
    each vDNN policy, the bytes ``conv`` and ``all`` offload, and every buffer declared
    (``declared_bytes``, the network-wide peak of ``none``), in GB (1e9 bytes)."""
    header = ("network", "batch", *(f"peak `{p}`" for p in MEMORY_POLICIES),
              *(f"offloaded `{p}`" for p in OFFLOAD_POLICIES),
              "all buffers (`declared_bytes`)")
    return markdown(header, [_memory_row(name, batch) for name, batch in cases])
