"""The parallel layout: what make_layout derives (dp from the GPUs, micro-batches from the
global batch) and every bad input refused with one line naming the params and the numbers."""
from __future__ import annotations

import pytest

from workloads.errors import WorkloadError
from workloads.parallel import LayoutError, ModelShape, ParallelLayout, make_layout

#: a model with grouped-query attention: 32 layers, 32 heads, 8 KV heads, FFN 14336
SHAPE = ModelShape(layers=32, heads=32, kv_heads=8, hidden=4096, ffn=14336, vocab=128256)


def test_dp_is_derived_from_the_gpus():
    layout = make_layout(SHAPE, tp=2, pp=4, gpus=64)
    assert (layout.tp, layout.pp, layout.dp, layout.gpus) == (2, 4, 8, 64)


def test_dp_given_with_the_gpus_must_agree_and_defaults_to_one_without_them():
    assert make_layout(SHAPE, tp=2, pp=2, dp=3, gpus=12).dp == 3
    assert make_layout(SHAPE, tp=2, pp=2).gpus == 4


def test_micro_batches_are_derived_from_the_global_batch():
    layout = make_layout(SHAPE, tp=1, pp=4, gpus=16, global_batch=96, micro_batch_size=2)
    assert layout.micro_batches == 96 // (2 * 4)
    assert layout.global_batch == 96
    assert make_layout(SHAPE, pp=4, micro_batches=7).micro_batches == 7
    assert make_layout(SHAPE, pp=4, dp=2, micro_batches=6, global_batch=12).micro_batches == 6


def test_the_layout_is_frozen_and_keeps_what_was_asked():
    layout = make_layout(SHAPE, tp=4, pp=4, dp=2, vpp=2, schedule="interleaved",
                         micro_batches=8, zero=3, sequence_parallel=True)
    assert layout == ParallelLayout(tp=4, pp=4, dp=2, vpp=2, schedule="interleaved",
                                    micro_batches=8, micro_batch_size=1, zero=3,
                                    sequence_parallel=True, stage_split=None)
    assert layout.virtual_stages == 8
    assert layout.stage_sizes(SHAPE.layers) == (4,) * 8
    with pytest.raises(AttributeError):
        layout.tp = 2  # type: ignore[misc]


def test_a_given_split_is_kept_as_a_tuple():
    split = [3, 5, 5, 5, 5, 5, 2, 2]
    layout = make_layout(SHAPE, pp=8, stage_split=tuple(split))
    assert layout.stage_split == tuple(split)
    assert layout.stage_sizes(SHAPE.layers) == tuple(split)


BAD = [
    # tp against the model's shape (Megatron: transformer_config.py, ColumnParallelLinear)
    (dict(tp=3), ["tp 3", "heads 32"]),
    (dict(tp=16), ["tp 16", "kv_heads 8"]),
    (dict(tp=4, shape=ModelShape(32, 32, 8, 4096, 14338, 32000)), ["tp 4", "ffn 14338"]),
    # pp against the layers
    (dict(pp=33), ["pp 33", "layers 32"]),
    (dict(pp=5), ["layers 32", "pp 5", "5 virtual stages", "stage_split"]),
    # tp x pp x dp against the GPUs
    (dict(tp=2, pp=4, dp=4, gpus=16), ["tp 2", "pp 4", "dp 4", "= 32", "gpus is 16"]),
    (dict(tp=2, pp=4, gpus=12), ["gpus 12", "tp 2", "pp 4", "= 8"]),
    # the global batch against micro_batch_size x dp
    (dict(dp=8, global_batch=100, micro_batch_size=2), ["global_batch 100", "micro_batch_size 2",
                                                        "dp 8", "= 16"]),
    (dict(dp=2, global_batch=8, micro_batches=3), ["global_batch 8", "micro_batches 4",
                                                   "micro_batches is 3"]),
    # the interleaved schedule
    (dict(pp=4, schedule="interleaved", vpp=1, micro_batches=4), ["interleaved", "vpp is 1"]),
    (dict(pp=4, schedule="interleaved", vpp=2, micro_batches=6),
     ["interleaved", "micro_batches a multiple of pp 4", "micro_batches is 6"]),
    (dict(pp=1, schedule="interleaved", vpp=2, micro_batches=4), ["interleaved", "pp is 1"]),
    (dict(pp=4, vpp=2, micro_batches=4), ["vpp 2", "'1f1b'"]),
    (dict(schedule="zb-v"), ["schedule 'zb-v'", "gpipe, 1f1b, interleaved"]),
    # the stage split
    (dict(pp=4, stage_split=(8, 8, 8, 7)), ["stage_split [8, 8, 8, 7]", "sums to 31",
                                            "layers 32"]),
    (dict(pp=4, stage_split=(16, 16, 0, 0)), ["stage_split entry 2", "is 0"]),
    (dict(pp=4, stage_split=(20, 16, -4, 0)), ["stage_split entry 2", "is -4"]),
    (dict(pp=4, stage_split=(16, 16)), ["stage_split has 2 entries", "pp 4", "vpp 1", "= 4"]),
    # ZeRO and sequence parallelism
    (dict(zero=4), ["zero 4", "0, 1, 2 or 3"]),
    (dict(zero=-1), ["zero -1"]),
    (dict(sequence_parallel=True), ["sequence_parallel", "tp > 1", "tp is 1"]),
    # sizes that are no sizes
    (dict(tp=0), ["tp 0", "positive"]),
    (dict(micro_batch_size=0), ["micro_batch_size 0", "positive"]),
    (dict(dp=0), ["dp 0", "positive"]),
    (dict(micro_batches=0), ["micro_batches 0", "positive"]),
    (dict(global_batch=-8), ["global_batch -8", "positive"]),
]


@pytest.mark.parametrize("kwargs, words", BAD, ids=[" ".join(w[:2]) for _, w in BAD])
def test_each_bad_input_is_refused_with_one_line_naming_params_and_numbers(kwargs, words):
    kwargs = dict(kwargs)
    shape = kwargs.pop("shape", SHAPE)
    with pytest.raises(LayoutError) as caught:
        make_layout(shape, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and not message.startswith("-")
    assert "--" not in message   # params, not flags: the CLI adds its own
    for word in words:
        assert word in message, (word, message)


def test_a_layout_error_is_a_workload_error_and_a_value_error():
    with pytest.raises(WorkloadError):
        make_layout(SHAPE, tp=3)
    with pytest.raises(ValueError):
        make_layout(SHAPE, tp=3)


def test_a_model_shape_refuses_a_size_that_is_no_size():
    with pytest.raises(LayoutError, match="kv_heads 0: must be a positive integer"):
        ModelShape(layers=2, heads=4, kv_heads=0, hidden=64, ffn=256, vocab=100)


def test_megatron_allows_what_it_allows():
    # tp that divides heads, KV heads and FFN; SP with tp 2; interleaved with m a multiple of pp
    layout = make_layout(SHAPE, tp=8, pp=4, vpp=4, gpus=32, schedule="interleaved",
                         micro_batches=8, sequence_parallel=True)
    assert layout.virtual_stages == 16 and layout.dp == 1
