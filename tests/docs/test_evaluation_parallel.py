"""EVALUATION.md's "Across many GPUs": every table of ``python -m sst_cdma.tools.parallel_study``
is shown in the section after its command, equal to what the command prints (slow: each runs
its simulations), and what the section's prose reads off the tables holds in them."""
from __future__ import annotations

import re

import pytest

from doc_tables import REPO, Table, block_starting, run_block, tables_after, tables_in
from sst_cdma.tools.parallel_study import TABLES
from sst_cdma.tools.parallel_study.published import PUBLISHED

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
