"""The README's list of model options is every option a cDMA topology takes, and its network
list every shipped network."""
from __future__ import annotations

from pathlib import Path

from sst_cdma.builder.topology import option_parser
from workloads import NETWORKS

REPO = Path(__file__).resolve().parents[2]


def _paragraph() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("Model options (after `--`) of every cDMA topology")
    return text[start:text.index("lists them.", start)]


def test_the_readme_lists_every_model_option():
    flags = {s for a in option_parser("pascal_cdma.py", "pascal", None, 1)._actions
             for s in a.option_strings if s.startswith("--") and s != "--help"}
    listed = _paragraph()
    assert sorted(f for f in flags if f"`{f}" not in listed) == []


def test_the_readme_lists_every_shipped_network():
    listed = _paragraph().replace("\n", " ")
    assert [n for n in NETWORKS if f" {n} " not in listed and f"`{n} " not in listed
            and f" {n}`" not in listed] == []
