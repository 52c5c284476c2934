"""Every summary the Reporter writes matches the schema in components/summary_schema.py, and
the README's table of keys is the one rendered from it."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary, markdown

REPO = Path(__file__).resolve().parents[2]


def summary(script: str, *opts: str, stop_at=None) -> dict:
    result = sst_cdma.run(REPO / "topologies" / script, list(opts), stop_at=stop_at,
                          console=io.StringIO())
    return result.reports["summary"]


@pytest.mark.parametrize("script, opts, stop_at", [
    ("pascal_cdma.py", ("--network", "alexnet", "--batch", "32"), None),
    ("pascal_cdma.py", ("--network", "digits_cnn", "--policy", "none"), None),
    ("pascal_cdma.py", ("--network", "digits_cnn", "--algorithm", "none", "--mode", "chunk"),
     None),
    ("pascal_cdma.py", ("--network", "digits_cnn", "--no-baselines"), None),
    ("pascal_cdma.py", ("--network", "digits_cnn"), "100us"),
    ("volta_nvlink_cdma.py", ("--network", "digits_cnn"), None),
    ("gh200_cdma.py", ("--network", "digits_cnn"), None),
    ("dgx1_cdma.py", ("--network", "digits_cnn"), None),
    ("pascal_cdma.py", ("--network", "vgg16", "--batch", "512", "--policy", "none"), None),
])
def test_every_summary_matches_the_schema(script, opts, stop_at):
    s = summary(script, *opts, stop_at=stop_at)
    assert check_summary(s) == []


def test_the_schema_catches_unknown_keys_wrong_types_and_missing_ones():
    s = summary("pascal_cdma.py", "--network", "digits_cnn")
    s["surprise"] = 1
    s["batch"] = "64"
    del s["iteration_time_s"]
    s["baselines"]["vdnn"]["policy"] = None
    faults = check_summary(s)
    assert "summary: unknown key 'surprise'" in faults
    assert "summary.batch: str is not integer" in faults
    assert "summary: key 'iteration_time_s' is missing" in faults
    assert "baselines.vdnn.policy: NoneType is not string" in faults


def test_the_readme_lists_every_key_from_the_schema():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- summary-schema:start -->\n")[1].split("<!-- summary-schema:end -->")[0]
    assert block == markdown()
