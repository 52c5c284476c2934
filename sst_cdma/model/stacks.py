"""The memory-bound kernels a training stack launches for one transformer block
(docs/kernel_model.md, "Stacks"): which kernels, the bytes each reads and writes, and their
time at the GPU's achievable DRAM bandwidth.

``fused`` is the simulator's own kernel set (the default, as before this module): each
element-wise layer of the network (norm, activation, residual add) is one kernel the GPU
prices from its tensors at run time, biases inside the GEMMs, no dropout. The named stacks
replace those layers' times by the kernels the stack launches:

* ``eager`` (PyTorch without compilation): layer norm, each linear layer's bias add, the
  activation, each residual branch's dropout and the residual add are separate kernels;
* ``compile`` (``torch.compile``, Inductor): the norm stays one kernel, the pointwise chains
  are fused, bias+activation into one kernel and bias+dropout+residual add into another;
* ``megatron`` (Megatron-LM with Transformer Engine): fused layer norm, ``bias_gelu`` and
  ``bias_dropout_add_fused`` kernels (the same bytes as ``compile``).

Backward, each kernel's backward reads the gradients of its outputs and the tensors it saved
and writes the gradients of its inputs; a bias's gradient is a reduction kernel (reads the
gradient, writes the bias gradient); a residual's backward accumulates the two branches'
gradients where they meet (reads two, writes one), in every stack.
"""
from __future__ import annotations

from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.element_params import fitted_word

from typing import Optional

__all__ = ["STACKS", "DEFAULT_STACK", "DRAM_FRACTION", "MASK_BYTES", "STAT_BYTES",
           "StackError", "BlockShape", "StackKernel", "block_kernels", "kernel_seconds",
           "check_stack", "describe_stack"]

#: the stacks the fitted kernels' ``stack`` param names; the first is the default (the simulator's own kernel set)
STACKS = ("fused", "eager", "compile", "megatron")
DEFAULT_STACK = STACKS[0]
#: achievable share of a GPU's peak DRAM bandwidth for a streaming kernel: 2.8 of the H100
#: SXM5's 3.35 TB/s for coalesced loads under Nsight Compute (docs/kernel_model.md, "Stacks",
#: cites it; no A100 measurement was found: the same share is applied to every GPU)
DRAM_FRACTION = 0.84
#: bytes per element of a dropout mask (PyTorch's native_dropout returns a bool mask)
MASK_BYTES = 1
#: bytes per token of a layer norm's saved statistics (fp32 mean and reciprocal std)
STAT_BYTES = 8
#: stacks that need Transformer Engine's fused kernels, and the tensor-core families TE runs
#: on (docs/kernel_model.md, "Stacks": TE's README asks for Volta or later)
_TE_STACKS = ("megatron",)
_TE_FAMILIES = ("Volta", "Turing", "Ampere", "Hopper", "Blackwell")


class StackError(ValueError):
    """A stack that does not exist or that the GPU cannot run (one line)."""


@frozen_record
class BlockShape(FrozenRecord):
    """The sizes of one transformer block a stack's kernels move: ``tokens`` (batch x
    sequence), ``hidden``, ``fc1`` (the first FFN GEMM's output width), ``act_out`` (the
    activation's output width: ``fc1``, or half of it for SwiGLU), ``qkv`` (the fused QKV
    width), ``itemsize`` (bytes per element), ``bias`` (linear layers with biases) and
    ``dropout`` (dropout on the residual branches: GPT-2's 0.1, none for Llama)."""

    tokens: int
    hidden: int
    fc1: int
    act_out: int
    qkv: int
    itemsize: int
    bias: bool
    dropout: bool


@frozen_record
class StackKernel(FrozenRecord):
    """One memory-bound kernel: its ``name``, the block layer it runs beside (``ln1``,
    ``act``, ``res1``...), its pass (``fwd``/``bwd``) and the bytes it reads and writes."""

    name: str
    layer: str
    pass_: str
    reads: int
    writes: int

    @property
    def bytes(self) -> int:
        """DRAM bytes moved: reads plus writes."""
        return self.reads + self.writes


def check_stack(stack: str, preset: str, tensor_family: str) -> str:
    """``stack`` if GPU preset ``preset`` (of tensor-core family ``tensor_family``, '' for
    none) runs it; an unknown stack or one the GPU cannot run is a :class:`StackError`."""
    if stack not in STACKS:
        raise StackError(f"{fitted_word('stack', stack)}: unknown stack (one of {', '.join(STACKS)})")
    if stack in _TE_STACKS and tensor_family not in _TE_FAMILIES:
        raise StackError(f"{fitted_word('stack', stack)}: GPU preset {preset!r} cannot run Transformer "
                         "Engine's fused kernels (they need a Volta or newer GPU)")
    return stack


def _norm(shape: BlockShape, layer: str) -> list[StackKernel]:
    t, h, s = shape.tokens, shape.hidden, shape.itemsize
    act, stats, params = t * h * s, t * STAT_BYTES, 2 * h * s
    return [StackKernel("layer_norm", layer, "fwd", act + params, act + stats),
            StackKernel("layer_norm_backward", layer, "bwd", 2 * act + stats + params,
                        act + params)]


def _bias_grad(shape: BlockShape, width: int, layer: str) -> list[StackKernel]:
    if not shape.bias:
        return []
    return [StackKernel("bias_grad", layer, "bwd", shape.tokens * width * shape.itemsize,
                        width * shape.itemsize)]


def _eager_bias(shape: BlockShape, width: int, layer: str) -> list[StackKernel]:
    if not shape.bias:
        return []
    act, b = shape.tokens * width * shape.itemsize, width * shape.itemsize
    return [StackKernel("bias_add", layer, "fwd", act + b, act)] + \
        _bias_grad(shape, width, layer)


def _eager_swiglu(x: int, y: int) -> list[StackKernel]:
    """SwiGLU as eager PyTorch runs ``silu(gate) * up``: two kernels each way."""
    return [StackKernel("silu", "act", "fwd", x // 2, y),
            StackKernel("mul", "act", "fwd", 2 * y, y),
            StackKernel("mul_backward", "act", "bwd", 3 * y, 2 * y),
            StackKernel("silu_backward", "act", "bwd", 2 * y, y)]


def _activation(shape: BlockShape, fused_bias: bool) -> list[StackKernel]:
    t, s = shape.tokens, shape.itemsize
    x, y = t * shape.fc1 * s, t * shape.act_out * s
    if not fused_bias and shape.act_out != shape.fc1:
        return _eager_swiglu(x, y)
    b = shape.fc1 * s if fused_bias and shape.bias else 0
    name = "bias_gelu" if b else "activation"
    out = [StackKernel(name, "act", "fwd", x + b, y),
           StackKernel(name + "_backward", "act", "bwd", y + x + b, x)]
    return out + (_bias_grad(shape, shape.fc1, "act") if b else [])


def _residual(shape: BlockShape, layer: str, fused: bool) -> list[StackKernel]:
    """The end of a residual branch: (bias,) dropout and the add, fused or one by one."""
    t, h, s = shape.tokens, shape.hidden, shape.itemsize
    act, mask = t * h * s, t * h * MASK_BYTES if shape.dropout else 0
    accumulate = StackKernel("residual_grad_accumulate", layer, "bwd", 2 * act, act)
    if fused:
        b = h * s if shape.bias else 0
        name = "bias_dropout_add" if shape.dropout else "bias_add_residual" if b else "add"
        out = [StackKernel(name, layer, "fwd", 2 * act + b, act + mask)]
        if mask:
            out.append(StackKernel(name + "_backward", layer, "bwd", act + mask, act))
        return out + (_bias_grad(shape, h, layer) if b else []) + [accumulate]
    out = _eager_bias(shape, h, layer)
    if mask:
        out += [StackKernel("dropout", layer, "fwd", act, act + mask),
                StackKernel("dropout_backward", layer, "bwd", act + mask, act)]
    return out + [StackKernel("add", layer, "fwd", 2 * act, act), accumulate]


def block_kernels(stack: str, shape: BlockShape) -> list[StackKernel]:
    """The memory-bound kernels ``stack`` launches for one transformer block of ``shape``
    (forward and backward), in block order; [] for ``fused`` (the GPU prices the network's
    own element-wise layers). Attention and the GEMMs are not here: the ``attention`` param
    and the GEMM path price them in every stack."""
    if stack not in STACKS:
        raise StackError(f"{fitted_word('stack', stack)}: unknown stack (one of {', '.join(STACKS)})")
    if stack == DEFAULT_STACK:
        return []
    eager = stack == "eager"
    out = _norm(shape, "ln1")
    if eager:
        out += _eager_bias(shape, shape.qkv, "qkv")
    else:
        out += _bias_grad(shape, shape.qkv, "qkv")
    out += _residual(shape, "res1", not eager) + _norm(shape, "ln2")
    out += (_eager_bias(shape, shape.fc1, "act") + _activation(shape, False)) if eager \
        else _activation(shape, True)
    return out + _residual(shape, "res2", not eager)


def kernel_seconds(kernel: StackKernel, dram_Bps: float, launch_s: float) -> float:
    """A memory-bound kernel's time: its bytes at ``DRAM_FRACTION`` of the GPU's peak DRAM
    bandwidth ``dram_Bps``, at least ``launch_s`` (the fitted host issue interval: a call
    costs the slower of its work and the launch)."""
    return max(kernel.bytes / (dram_Bps * DRAM_FRACTION), launch_s)


def describe_stack(stack: str, dram_Bps: Optional[float] = None) -> str:
    """What ``stack`` prices, for the summary's ``kernel_times``."""
    if stack == DEFAULT_STACK:
        return ("stack fused: each element-wise layer one kernel at the HBM's achievable "
                "bandwidth, biases in the GEMMs, no dropout (the simulator's own set)")
    rate = f" = {dram_Bps * DRAM_FRACTION / 1e9:.0f} GB/s" if dram_Bps else ""
    return (f"stack {stack}: its memory-bound kernels at {DRAM_FRACTION} of peak DRAM "
            f"bandwidth{rate} (fitted to a published H100 SXM5 load bandwidth, carried to "
            "other GPUs), at least the fitted launch; GEMMs on the tensor-core path (tiles and "
            "waves fitted to the T4's 160 DeepBench GEMMs, cuBLAS factor to each family's best "
            "bf16 GEMM)")

