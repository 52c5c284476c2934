"""Tables of facts from sources agree with the constants the model takes from them: the NVMe
presets of docs/storage.md are sst_cdma/model/ssds.py's, and the model column of docs/model.md's
pinned-copy measurements is sst_cdma/model/links.py's rate, within 5% of each generation's
fastest measured copy."""
from __future__ import annotations

import re

import pytest

from doc_tables import DOCS, Table, page_tables
from sst_cdma.engine.units import parse_bandwidth, parse_bytes, parse_time_ps
from sst_cdma.model.links import PCIeLink
from sst_cdma.model.ssds import SSDS


def _table(page: str, heading: str, first_header: str) -> Table:
    """The table of ``page`` under ``heading`` whose header starts with ``first_header``."""
    found = [t for t in page_tables(DOCS / page)
             if t.heading == heading and t.rows[0][0] == first_header]
    assert len(found) == 1, f"{page} § {heading}: {len(found)} tables start with {first_header}"
    return found[0]


def _records(table: Table) -> list[dict[str, str]]:
    """The table's rows below its header, keyed by the header's cells."""
    header = table.rows[0]
    return [dict(zip(header, row)) for row in table.rows[1:]]


def _figure(cell: str) -> str:
    """A cell such as ``6,800 MB/s`` or ``3.84 TB`` as the units parser reads it."""
    return cell.replace(",", "").replace(" ", "")


PRESETS = _records(_table("storage.md", "Presets", "preset"))


def test_the_preset_table_names_every_preset_once():
    names = [row["preset"].strip("`") for row in PRESETS]
    assert sorted(names) == sorted(SSDS)


@pytest.mark.parametrize("row", PRESETS, ids=lambda row: row["preset"].strip("`"))
def test_a_preset_row_is_the_presets_figures(row):
    spec = SSDS[row["preset"].strip("`")]
    figures = spec.figures()
    assert row["link"] == f"PCIe gen{spec.generation} x{spec.lanes}"
    assert parse_bytes(_figure(row["capacity"])) == figures["capacity"]
    assert parse_bandwidth(_figure(row["sequential read"])) == figures["read_bandwidth"]
    assert parse_bandwidth(_figure(row["sequential write"])) == figures["write_bandwidth"]
    read, write = row["read / write latency"].split(" / ")
    assert parse_time_ps(_figure(read)) == figures["read_latency"]
    assert parse_time_ps(_figure(write)) == figures["write_latency"]
    assert row["source"].startswith(spec.source)


COPIES = _records(_table("model.md", "Host links from first principles", "link"))


def _generation(row: dict[str, str]) -> int:
    match = re.fullmatch(r"gen(\d) x16", row["link"])
    assert match, row["link"]
    return int(match.group(1))


def _measured(row: dict[str, str]) -> list[float]:
    """Every rate (GB/s) of the row's two direction columns (a range gives both ends)."""
    cells = (row["host to device"], row["device to host"])
    return [float(x) for cell in cells for x in re.findall(r"\d+\.\d+", cell)]


@pytest.mark.parametrize("row", COPIES, ids=lambda row: f"{row['link']}: {row['GPU, tool, copy']}")
def test_the_model_column_is_the_links_rate(row):
    rate = PCIeLink(_generation(row), 16).effective / 1e9
    assert float(row["model"]) == round(rate, 2)


@pytest.mark.parametrize("generation", (3, 4, 5))
def test_each_generation_lands_within_5_percent_of_its_fastest_measured_copy(generation):
    rows = [row for row in COPIES if _generation(row) == generation]
    fastest = max(x for row in rows for x in _measured(row))
    assert PCIeLink(generation, 16).effective / 1e9 == pytest.approx(fastest, rel=0.05)
