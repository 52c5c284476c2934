"""docs/topologies.md names every host-link preset ``--link`` takes (the model's table), so a
preset added to sst_cdma/model/links.py cannot go unmentioned."""
from __future__ import annotations

import re
from pathlib import Path

from sst_cdma.model.links import HOST_LINKS

REPO = Path(__file__).resolve().parents[2]


def test_the_link_row_names_every_preset():
    page = (REPO / "docs" / "topologies.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `link` |"))
    named = set(re.findall(r"`([a-z0-9_]+)`", row)) & set(HOST_LINKS)
    assert named == set(HOST_LINKS), sorted(set(HOST_LINKS) - named)
