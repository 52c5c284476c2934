"""Attacks on a shared sweep folder (issue #34): a link planted where the sweep writes its
table or its points would redirect the write outside the folder; the sweep refuses it before
anything runs, and the table's write itself never follows one planted later."""
from __future__ import annotations

import pytest

from sst_cdma.tools.sweep import SpecError, run_sweep
from sst_cdma.tools.sweep.table import build_table, write_tables

SPEC = "topology: {script}\ngrid: {n: [1, 2]}\n"


@pytest.mark.parametrize("name", ["results.csv", "results.parquet"])
def test_a_planted_table_link_is_refused_before_anything_runs(counting, tmp_path, client1,
                                                             name):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own\n")
    out = tmp_path / "out"
    run_sweep(counting.spec(SPEC), output=out, client=client1, progress=False)
    (out / name).unlink()
    (out / name).symlink_to(victim)
    with pytest.raises(SpecError) as err:
        run_sweep(counting.spec(SPEC + "options: {value: 0.25}\n"), output=out,
                  client=client1, progress=False)
    assert str(err.value) == (f"{out / name}: {name} is a symlink (to {victim}) the program "
                              "did not make, which is not replaced by a file: remove it, the "
                              "sweep writes its table there")
    assert victim.read_text() == "the user's own\n" and counting.total() == 2


def test_a_planted_points_link_is_refused(counting, tmp_path, client1):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "points").symlink_to(elsewhere)
    with pytest.raises(SpecError, match=r"its points folder is a symlink \(to .*elsewhere\), "
                                        "which the sweep did not make"):
        run_sweep(counting.spec(SPEC), output=out, client=client1, progress=False)
    assert list(elsewhere.iterdir()) == [] and counting.total() == 0


def test_a_link_planted_after_the_check_is_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own\n")
    (tmp_path / "results.csv").symlink_to(victim)
    table = build_table([{"point": 0, "status": "ok"}])
    with pytest.raises(OSError, match="is a symlink"):
        write_tables(table, tmp_path)
    assert victim.read_text() == "the user's own\n"
