"""EVALUATION.md's "Across many GPUs": every table of ``python -m sst_cdma.tools.parallel_study``
is shown in the section after its command, equal to what the command prints (slow: each runs
its simulations), and what the section's prose reads off the tables holds in them."""
from __future__ import annotations

import re

import pytest

from doc_tables import REPO, Table, block_starting, run_block, tables_after, tables_in
from sst_cdma.tools.parallel_study import TABLES
from sst_cdma.tools.parallel_study.published import PUBLISHED
from workloads.parallel.tensor import transformer_dims

PAGE = REPO / "EVALUATION.md"
COMMAND = "python -m sst_cdma.tools.parallel_study {}"
SECTION = re.compile(r"^## \d+\. Across many GPUs$")


def _shown(name: str) -> Table:
    shown = tables_after(PAGE, block_starting(PAGE, COMMAND.format(name)))
    assert len(shown) == 1, (name, len(shown))
    return shown[0]


def _section_lines() -> range:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(n for n, line in enumerate(lines, 1) if SECTION.match(line))
    end = next((n for n, line in enumerate(lines, 1) if n > start and line.startswith("## ")),
               len(lines) + 1)
    return range(start, end)


def _rows(name: str) -> list[dict[str, str]]:
    table = _shown(name)
    return [dict(zip(table.rows[0], row)) for row in table.rows[1:]]


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in cell.split(", ")]


def test_every_table_of_the_study_is_shown_in_the_section_after_its_command():
    section = _section_lines()
    for name in TABLES:
        assert _shown(name).line in section, name


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TABLES))
def test_the_section_shows_the_table_its_command_prints(name, tmp_path):
    block = block_starting(PAGE, COMMAND.format(name))
    printed = tables_in(run_block(block, tmp_path / "run"))
    assert [t.rows for t in printed] == [_shown(name).rows]


def test_offload_and_recomputation_save_most_on_the_first_stage_and_the_last_saves_less_deeper():
    rows = _rows("pipeline-depth")
    for row in rows:
        assert len(_numbers(row["peak GiB per stage, first to last"])) == int(row["pp"])
        if row["policy"] in ("keep", "recompute"):
            assert row["of it, copy waits"] == "0.0%"
        if row["policy"] != "keep":
            assert float(row["saved on the first, GiB"]) > float(row["saved on the last, GiB"])
    for policy in {row["policy"] for row in rows} - {"keep"}:
        last = [float(r["saved on the last, GiB"]) for r in rows if r["policy"] == policy]
        first = [float(r["saved on the first, GiB"]) for r in rows if r["policy"] == policy]
        assert last == sorted(last, reverse=True) and first == sorted(first), policy


def test_the_schedules_hold_the_passes_the_closed_forms_say_and_1f1b_keeps_gpipes_step():
    m = 8
    rows = _rows("schedules")
    for row in rows:
        p, v = int(row["pp"]), int(row["vpp"])
        flight = [int(n) for n in row["passes in flight per stage, first to last"].split(", ")]
        if row["schedule"] == "1F1B":
            assert flight == [min(p - s, m) for s in range(p)]
        elif row["schedule"] == "GPipe":
            assert flight == [m] * p
        elif m >= 2 * p:   # interleaved, in the steady state Korthikanti et al.'s factor holds
            assert flight == [2 * (p - s - 1) + (v - 1) * p + 1 for s in range(p)]
            assert float(row["micro-batches' activations on the first"]) == pytest.approx(
                p * (1 + (p - 1) / (p * v)))
    for pp in {row["pp"] for row in rows}:
        steps = {(r["schedule"], r["vpp"]): float(r["step ms"]) for r in rows if r["pp"] == pp}
        assert steps["GPipe", "1"] == steps["1F1B", "1"]
        assert steps["1F1B", "1"] > steps["interleaved", "2"] > steps["interleaved", "4"]


def test_the_keep_rows_are_the_schedules_1f1b_rows():
    schedules = {r["pp"]: r["step ms"] for r in _rows("schedules") if r["schedule"] == "1F1B"}
    keep = {r["pp"]: r["step ms"] for r in _rows("pipeline-depth") if r["policy"] == "keep"}
    assert schedules and all(keep[pp] == step for pp, step in schedules.items())


def test_the_published_column_is_table_1s_and_the_ratio_is_the_two_columns():
    rows = _rows("megatron")
    assert [r["published"] for r in rows] == [f"{p.tflops:.0f}" for p in PUBLISHED]
    for row in rows:
        ratio = float(row["simulated TFLOP/s per GPU (Eq. 3)"]) / float(row["published"])
        assert float(row["simulated / published"]) == pytest.approx(ratio, abs=0.006)


def _stage_counts(cell: str) -> list[int]:
    return [int(x) for x in cell.split(", ")]


def test_the_planner_fits_every_stage_plans_only_the_first_ones_and_zvc_changes_nothing():
    rows = _rows("stage-auto")
    m = 8
    choices = ("offload per stage", "compress per stage", "recompute per stage",
               "keep per stage")
    for pp in {row["pp"] for row in rows}:
        p = int(pp)
        at = {r["activations"]: r for r in rows if r["pp"] == pp}
        assert at["keep"]["runs out first"] == "stage 0"
        assert all(at["keep"][c] == "-" for c in choices)
        assert {k: v for k, v in at["auto, ZVC"].items() if k != "activations"} == \
            {k: v for k, v in at["auto, plain copy"].items() if k != "activations"}
        sizes = set()
        for label, row in at.items():
            assert _stage_counts(row["in flight per stage"]) == [min(p - s, m) for s in range(p)]
            if label == "keep":
                continue
            assert row["runs out first"] == "-"
            assert max(_numbers(row["peak GiB per stage, first to last"])) <= 80.0
            counts = [_stage_counts(row[c]) for c in choices]
            sizes.add(tuple(map(sum, zip(*counts))))     # each stage's activations, whatever plan
            planned = [any(c[s] for c in counts[:3]) for s in range(p)]
            assert planned[0] and planned == sorted(planned, reverse=True), (pp, label)
        assert len(sizes) == 1, pp


def test_the_network_and_the_copies_lose_time_to_each_other_only_where_both_run():
    rows = _rows("pcie-switch")
    lost = ("network lost to copies, ms per stage", "copies lost to network, ms per stage")
    by = {(r["nodes"], r["ZeRO"], r["activations"]): r for r in rows}
    for (nodes, zero, label), row in by.items():
        keep = by[nodes, zero, "keep"]
        assert float(row["x keep"]) == pytest.approx(
            float(row["step ms"]) / float(keep["step ms"]), abs=0.006)
        for column in lost:
            assert all((v == 0) == (label == "keep") for v in _numbers(row[column])), row
    for nodes in {r["nodes"] for r in rows}:
        plain1 = by[nodes, "1", "offload all, plain copy"]
        plain3 = by[nodes, "3", "offload all, plain copy"]
        zstd3 = by[nodes, "3", "offload all, byte-plane Zstd"]
        for a, b in zip(_numbers(plain1[lost[0]]), _numbers(plain3[lost[0]])):
            assert b > 5 * a      # ZeRO 3's gathers run beside the copies, ZeRO 1's do not
        for a, b in zip(_numbers(zstd3[lost[0]]), _numbers(plain3[lost[0]])):
            assert a < b          # compressed copies hold the link for less time
        assert float(zstd3["step ms"]) < float(plain3["step ms"])
    for key, h100 in by.items():
        if key[0] == "DGX H100" and key[2] != "keep":
            a100 = by[("DGX A100", key[1], key[2])]
            assert all(a > h for a, h in zip(_numbers(a100[lost[0]]), _numbers(h100[lost[0]])))


def test_the_405b_row_is_the_benchmarks_layout_and_the_6n_column_is_palms_count_cut():
    import sys
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_parallel
    from workloads import load_network

    table = tables_after(PAGE, block_starting(PAGE, "python benchmarks/bench_parallel.py "
                                                    "--cases 405b"))
    assert len(table) == 1
    rows = [dict(zip(table[0].rows[0], row)) for row in table[0].rows[1:]]
    options = (bench_parallel.CASES["405b"].format(mb405=bench_parallel.MICRO_BATCHES_405B)
               + " " + bench_parallel.COMMON).split()
    value = {k: options[options.index(k) + 1] for k in ("--tp", "--pp", "--dp", "--seq-len",
                                                        "--micro-batches")}
    simulated = rows[-1]
    tp, pp, dp = (int(value[k]) for k in ("--tp", "--pp", "--dp"))
    assert simulated["tp x pp x dp"] == f"{tp} x {pp} x {dp}"
    assert int(simulated["GPUs"].replace(",", "")) == tp * pp * dp
    assert simulated["tokens a sequence"] == f"{int(value['--seq-len']):,}"
    assert simulated["sequences a replica"] == value["--micro-batches"]
    tokens = int(value["--micro-batches"]) * int(value["--seq-len"]) * dp
    assert simulated["tokens a step"] == f"{tokens / 1e6:.1f}M"
    network = load_network("llama3_405b")
    d = transformer_dims(network)
    for row in rows[:-1]:
        t = int(row["tokens a sequence"].replace(",", ""))
        six_n = 6 * network.param_count()
        attention = 12 * d.blocks * d.hidden * t
        published = float(row["MFU"].rstrip("%")) / 100
        assert row["counted as 6N"] == f"{published * six_n / (six_n + attention):.1%}"


def test_zero_3_and_offload_each_lower_the_peak_and_offload_leaves_zero_3_s_dp_time():
    rows = {(r["ZeRO"], r["optimizer states"]): r for r in _rows("zero")}
    peak = {key: _numbers(r["peak GiB per stage, first to last"]) for key, r in rows.items()}
    for s in range(2):
        assert peak["0", "gpu"][s] > peak["1", "gpu"][s] > peak["3", "gpu"][s]
        for z in ("1", "2", "3"):
            # the optimizer-state shard leaves the GPU, to the host or the SSDs alike
            assert peak[z, "host"][s] == peak[z, "nvme"][s] < peak[z, "gpu"][s]
    for z in ("1", "2", "3"):
        assert float(rows[z, "gpu"]["step ms"]) < float(rows[z, "host"]["step ms"]) < \
            float(rows[z, "nvme"]["step ms"])
        assert rows[z, "gpu"]["host CPU ms: step / its GPU's wait, per stage"] == "-" != \
            rows[z, "host"]["host CPU ms: step / its GPU's wait, per stage"]
    # ZeRO 3's passes run every dp collective wherever the states are
    dp = {rows["3", where]["DP ms exposed / hidden, per stage"] for where in ("gpu", "host", "nvme")}
    assert len(dp) == 1
    room = {key: float(r["room on the fullest stage, GiB"]) for key, r in rows.items()}
    assert max(room, key=room.__getitem__) in {("3", "host"), ("3", "nvme")}
    assert rows["0", "gpu"]["runs out first"] == "stage 0"
