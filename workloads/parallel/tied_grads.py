"""The tied word embeddings' gradient all-reduce between the first and the last pipeline stage
(docs/parallel.md, "Stages of a transformer").

With a tied LM head on a pipeline the last stage keeps a copy of the word embeddings
(:class:`~workloads.parallel.transformer_stages.TiedHead`); Megatron-LM keeps the two copies
equal by all-reducing their gradients over the embedding group (each pipeline's first and last
rank) before the optimizer step: ``finalize_model_grads`` in
``megatron/core/distributed/finalize_model_grads.py`` runs the data-parallel gradient sync
(``finish_grad_sync``), then the non-tensor-parallel (sequence-parallel norm) gradients'
all-reduce, then ``_allreduce_word_embedding_grads``, which all-reduces the word embeddings'
gradient in place (``torch.distributed.all_reduce(grad, group=embd_group)``).

Here the stage's update gets that all-reduce (``group=embedding``) just before its first step
kernel, so after its dp reductions (waited for) and its sequence-parallel all-reduce. Its bytes
are the word embeddings' gradient as the stage holds it: the tied head's parameters (this
tensor-parallel rank's vocabulary shard x hidden) in the iteration's dtype, the 1/dp shard
where the gradients are sharded (ZeRO 2 on the GPU, ZeRO 3). It runs in place on the stage's
gradient tensor when that has those bytes (the head's copy); the first stage's ``embed``
gradient also holds a learned position table (GPT-2's), so there it runs on a buffer of its
own, :data:`WORD_EMBEDDING_GRADS`, allocated just before and freed just after (Megatron
all-reduces a view of the gradient; the buffer is memory it does not use, held in the update
phase only).
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..dtypes import itemsize
from ..stream_schema import StreamOp, StreamTensor

__all__ = ["EMBEDDING_GROUP", "WORD_EMBEDDING_GRADS", "word_embedding_grad_bytes",
           "with_embedding_all_reduce"]

#: the process-group kind of each pipeline's first and last rank (ranks.py's ``embedding``)
EMBEDDING_GROUP = "embedding"
#: the buffer the word embeddings' gradient is all-reduced in where the stage's gradient
#: tensor holds more (the first stage's, with the position table)
WORD_EMBEDDING_GRADS = "embedding:word_grads"


def word_embedding_grad_bytes(params: int, dtype: str, dp: int, sharded: bool) -> int:
    """The bytes of the word embeddings' gradient of ``params`` parameters one rank holds:
    the whole, or with ``sharded`` gradients its largest 1/``dp`` shard."""
    held = -(-params // dp) if sharded and dp > 1 else params
    return held * itemsize(dtype)


def with_embedding_all_reduce(update: Sequence[StreamOp], tensors: dict[str, StreamTensor],
                              gradient: str, nbytes: int
                              ) -> tuple[dict[str, StreamTensor], list[StreamOp]]:
    """The stage's ``update`` with the all-reduce of ``nbytes`` of the word embeddings'
    gradient over the embedding group just before its first step kernel (at its end when it
    has none): in place on ``gradient`` when ``tensors`` declares it with those bytes, else
    on :data:`WORD_EMBEDDING_GRADS`, allocated just before and freed just after (its
    declaration added to the returned ``tensors``)."""
    held: Optional[StreamTensor] = tensors.get(gradient)
    if held is not None and held.bytes == nbytes:
        ops = [StreamOp("all_reduce", gradient, "update", group=EMBEDDING_GROUP)]
    else:
        layer = held.layer if held is not None else None
        tensors = {**tensors, WORD_EMBEDDING_GRADS: StreamTensor(WORD_EMBEDDING_GRADS, nbytes,
                                                                 "gradient", layer)}
        ops = [StreamOp("alloc", WORD_EMBEDDING_GRADS, "update"),
               StreamOp("all_reduce", WORD_EMBEDDING_GRADS, "update", group=EMBEDDING_GROUP),
               StreamOp("free", WORD_EMBEDDING_GRADS, "update")]
    at = next((i for i, op in enumerate(update) if op.op == "compute"), len(update))
    return tensors, list(update[:at]) + ops + list(update[at:])
