"""ZeRO's per-rank model-state bytes and step volumes against the paper (Rajbhandari et al.,
SC 2020: Figure 1, Table 1, section 7), the ZeRO-3 / FSDP schedule as data, and bad input."""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest

from sst_cdma.tools.zero_table import main
from workloads import WorkloadError, load_network
from workloads.parallel.zero import (ZERO_STAGES, bytes_per_param, fsdp_schedule, fsdp_units,
                                     model_state_bytes, step_collectives,
                                     step_volume_bytes)

PSI = 7_500_000_000  # the paper's example model: Ψ = 7.5B, K = 12, mixed precision with Adam
#: Figure 1: per-device model-state GB at N_d = 64, baseline then P_os, P_os+g, P_os+g+p
FIGURE_1 = ("120", "31.4", "16.6", "1.9")
#: Table 1, the 7.5B model's columns (GB per device) by DP degree: P_os, P_os+g, P_os+g+p
TABLE_1 = {1: ("120", "120", "120"), 4: ("52.5", "41.3", "30"), 16: ("35.6", "21.6", "7.5"),
           64: ("31.4", "16.6", "1.88"), 256: ("30.4", "15.4", "0.47"),
           1024: ("30.1", "15.1", "0.12")}


def gb(value: int, printed: str) -> str:
    """``value`` bytes in GB (10^9), rounded half up to the digits of the paper's ``printed``."""
    digits = Decimal(printed).as_tuple().exponent
    return str((Decimal(value) / Decimal(10**9)).quantize(Decimal(1).scaleb(digits),
                                                           rounding=ROUND_HALF_UP))


def test_mixed_precision_adam_is_2_2_and_12_bytes_per_parameter():
    for dtype in ("float16", "bfloat16"):
        per = bytes_per_param(dtype, "adam")
        assert (per.weights, per.gradients, per.optimizer) == (2, 2, 12)
    assert bytes_per_param("float32", "adam").total == 4 + 4 + 8  # fp32: no master copy
    assert bytes_per_param("float16", "sgd").optimizer == 4  # the master copy alone


def test_figure_1_worked_example():
    got = [model_state_bytes(PSI, 64, s).total for s in ZERO_STAGES]
    assert [gb(v, p) for v, p in zip(got, FIGURE_1)] == list(FIGURE_1)
    assert got[0] == 16 * PSI  # (2 + 2 + K) Ψ exactly


@pytest.mark.parametrize("dp", sorted(TABLE_1))
def test_table_1_the_7_5b_model(dp):
    got = [model_state_bytes(PSI, dp, s).total for s in (1, 2, 3)]
    assert [gb(v, p) for v, p in zip(got, TABLE_1[dp])] == list(TABLE_1[dp])
    assert model_state_bytes(PSI, dp, 0).total == 16 * PSI  # no stage: replicated at any dp


def test_each_stage_shards_its_state_and_keeps_the_others_whole():
    params, dp = 1000, 8
    s = [model_state_bytes(params, dp, stage) for stage in ZERO_STAGES]
    assert (s[0].weights, s[0].gradients, s[0].optimizer) == (2000, 2000, 12000)
    assert (s[1].weights, s[1].gradients, s[1].optimizer) == (2000, 2000, 1500)
    assert (s[2].weights, s[2].gradients, s[2].optimizer) == (2000, 250, 1500)
    assert (s[3].weights, s[3].gradients, s[3].optimizer) == (250, 250, 1500)
    # an uneven split: the largest shard, Ψ / N_d rounded up
    assert model_state_bytes(1001, 8, 3).weights == 126 * 2


def test_step_volumes_are_2_psi_and_3_psi():
    for stage in (0, 1, 2):
        assert sum(c.volume for c in step_collectives(PSI, stage)) == 2 * PSI
        assert step_volume_bytes(PSI, stage, "bfloat16") == 2 * PSI * 2
    assert sum(c.volume for c in step_collectives(PSI, 3)) == 3 * PSI
    assert step_volume_bytes(PSI, 3, "float16") == 3 * PSI * 2
    assert [c.kind for c in step_collectives(PSI, 0)] == ["all_reduce"]
    assert [(c.kind, c.phase) for c in step_collectives(PSI, 3)] == [
        ("all_gather", "forward"), ("all_gather", "backward"), ("reduce_scatter", "backward")]


@pytest.mark.parametrize("call, message", [
    (lambda: model_state_bytes(PSI, 64, 4), r"^zero stage 4: expected one of 0, 1, 2, 3$"),
    (lambda: model_state_bytes(PSI, 64, -1), r"^zero stage -1: "),
    (lambda: model_state_bytes(PSI, 64, True), r"^zero stage True: "),
    (lambda: step_collectives(PSI, "2"), r"^zero stage '2': "),
    (lambda: model_state_bytes(PSI, 0, 1), r"^dp 0: the data-parallel degree must be a "),
    (lambda: model_state_bytes(PSI, -4, 1), r"^dp -4: "),
    (lambda: model_state_bytes(-1, 4, 1), r"^params -1: "),
    (lambda: bytes_per_param("float16", "lamb"), r"^optimizer 'lamb': expected one of "),
    (lambda: fsdp_schedule([], bucket_bytes=-1), r"^bucket_bytes -1: "),
])
def test_bad_input_is_refused_naming_the_parameter_and_value(call, message):
    with pytest.raises(WorkloadError, match=message):
        call()


def test_the_command_refuses_a_bad_dp_in_one_line(capsys):
    assert main(["--dp", "64", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dp 0: the data-parallel degree" in err


# -- the ZeRO-3 / FSDP schedule ------------------------------------------------------------------

@pytest.fixture(scope="module")
def llama():
    """llama3_8b's layers at a short sequence, in bfloat16."""
    return load_network("llama3_8b", seq_len=16).infer(1, "bfloat16")


def test_units_are_the_blocks_and_the_weighted_layers_outside_them(llama):
    units = fsdp_units(llama)
    assert [u.name for u in units] == ["embed", *(f"blk{i}" for i in range(32)), "ln_f",
                                       "lm_head"]
    assert units[1].layers[0] == "blk0/ln1" and units[1].layers[-1] == "blk0/res2"
    assert sum(u.params for u in units) == 8_030_261_248
    assert sum(u.weight_bytes for u in units) == 2 * 8_030_261_248


def test_the_schedule_moves_3_psi(llama):
    ops = fsdp_schedule(llama)
    params = sum(i.params for i in llama)
    moved = sum(o.bytes for o in ops if o.kind != "free")
    assert moved == step_volume_bytes(params, 3, "bfloat16")
    assert {o.group for o in ops} == {"dp"}
    gathers = [o for o in ops if o.kind == "all_gather"]
    assert sum(o.bytes for o in gathers if o.phase == "forward") == 2 * params
    assert sum(o.bytes for o in gathers if o.phase == "backward") == 2 * params
    assert sum(o.bytes for o in ops if o.kind == "free") == 2 * 2 * params


def test_one_unit_of_prefetch_and_frees_after_use(llama):
    ops = fsdp_schedule(llama)
    fwd = {o.units[0]: o for o in ops if o.kind == "all_gather" and o.phase == "forward"}
    bwd = {o.units[0]: o for o in ops if o.kind == "all_gather" and o.phase == "backward"}
    assert (fwd["embed"].before, fwd["embed"].needed_by) == ("embed", "embed")
    assert (fwd["blk1"].before, fwd["blk1"].needed_by) == ("blk0/ln1", "blk1/ln1")
    # the backward runs units last to first; BACKWARD_PRE: the next unit's gather is issued
    # before the current unit's gradient kernels
    assert (bwd["lm_head"].before, bwd["lm_head"].needed_by) == ("lm_head", "lm_head")
    assert (bwd["blk30"].before, bwd["blk30"].needed_by) == ("blk31/res2", "blk30/res2")
    frees = [o for o in ops if o.kind == "free" and o.units == ("blk5",)]
    assert [(o.phase, o.after) for o in frees] == [("forward", "blk5/res2"),
                                                  ("backward", "blk5/ln1")]


def live_units(ops, layers, phase):
    """The most units whose gathered weights are alive at once, walking ``layers`` in the
    phase's order: a gather lives from its issue to its free."""
    live: set[str] = set()
    most = 0
    for layer in layers:
        live |= {o.units[0] for o in ops
                 if o.kind == "all_gather" and o.phase == phase and o.before == layer}
        most = max(most, len(live))
        live -= {o.units[0] for o in ops
                 if o.kind == "free" and o.phase == phase and o.after == layer}
    return most, live


def test_at_most_two_units_are_gathered_at_once(llama):
    ops = fsdp_schedule(llama)
    names = [i.name for i in llama]
    assert live_units(ops, names, "forward") == (2, set())
    assert live_units(ops, names[::-1], "backward") == (2, set())


def test_gradients_are_reduce_scattered_in_buckets(llama):
    units = fsdp_units(llama)
    block = units[1].weight_bytes
    per_unit = [o for o in fsdp_schedule(llama) if o.kind == "reduce_scatter"]
    assert [o.units for o in per_unit] == [(u.name,) for u in units[::-1]]
    assert per_unit[1].after == "ln_f" and per_unit[2].after == "blk31/ln1"
    bucketed = [o for o in fsdp_schedule(llama, bucket_bytes=2 * block)
                if o.kind == "reduce_scatter"]
    assert bucketed[1].units == ("ln_f", "blk31", "blk30")  # closes once it holds 2 blocks
    assert all(o.bytes >= 2 * block for o in bucketed[:-1])
    assert sum(o.bytes for o in bucketed) == sum(o.bytes for o in per_unit)
    assert bucketed[-1].after == "embed"
