"""Compression ratios from density: ZVC from its format, RLE/zlib/LZ4/zstd from the shipped table of
real-codec samples (checked here against fresh samples), and the wire-size rule."""
from __future__ import annotations

import json

import pytest

from sst_cdma.codecs import sampling
from sst_cdma.codecs.sampling import sample_ratio as _sampled_ratio
from sst_cdma.model import compression
from sst_cdma.model.compression import (DENSITY_STEPS, DTYPES, _ratio_table, ratio_from_density,
                                        sampled_algorithms, wire_bytes)

SAMPLED = sampled_algorithms()
LIBRARY_OF = {"zlib": "zlib_version", "lz4": "lz4_version", "zstd": "zstd_version",
              "bplane_zstd": "zstd_version"}
"""The library whose version decides each sampled codec's output bytes."""


def test_the_sampled_algorithms_are_the_registered_codecs_without_a_formula():
    assert SAMPLED == ("rle", "zlib", "lz4", "zstd", "bplane_zstd")


def test_the_table_covers_the_density_grid_for_every_sampled_algorithm_and_type():
    table = _ratio_table()
    assert table is not None
    for algo in SAMPLED:
        for dtype in DTYPES:
            ratios = table[algo][dtype]
            assert len(ratios) == DENSITY_STEPS + 1
            assert all(r > 0 for r in ratios)


@pytest.mark.parametrize("algo", SAMPLED)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_table_entries_equal_fresh_samples_of_the_real_codec(algo, dtype):
    shipped = json.loads(compression.TABLE_PATH.read_text())
    library = LIBRARY_OF.get(algo)
    here = compression.library_versions()
    if library is not None and shipped[library] != here[library]:
        pytest.skip(f"table made with {library} {shipped[library]}, this is "
                    f"{here[library]}: its output may differ byte for byte")
    for step in range(0, DENSITY_STEPS + 1, 25):
        assert shipped["ratios"][algo][dtype][step] == _sampled_ratio(algo, step, dtype), step


def test_runs_look_ratios_up_instead_of_sampling(monkeypatch):
    def no_sampling(*args):
        raise AssertionError("sampled although the table has the entry")

    monkeypatch.setattr(sampling, "sample_ratio", no_sampling)
    table = _ratio_table()
    assert ratio_from_density("rle", 0.3) == table["rle"]["float32"][60]
    assert ratio_from_density("zlib", 0.502, "float16") == table["zlib"]["float16"][100]


def test_a_table_made_for_other_settings_is_ignored(monkeypatch, tmp_path):
    stale = tmp_path / "ratio_table.json"
    stale.write_text(json.dumps({"sample_elements": 1, "density_steps": DENSITY_STEPS,
                                 "ratios": {}}))
    monkeypatch.setattr(compression, "TABLE_PATH", stale)
    _ratio_table.cache_clear()
    try:
        assert _ratio_table() is None
        assert ratio_from_density("rle", 0.3) == _sampled_ratio("rle", 60, "float32")
    finally:
        _ratio_table.cache_clear()


def test_the_ratio_table_tool_refuses_to_check_a_stale_table(monkeypatch, tmp_path, capsys):
    from sst_cdma.tools.ratio_table import main

    stale = tmp_path / "ratio_table.json"
    stale.write_text(json.dumps({"sample_elements": 1, "density_steps": DENSITY_STEPS,
                                 "ratios": {}}))
    monkeypatch.setattr(compression, "TABLE_PATH", stale)
    _ratio_table.cache_clear()
    try:
        assert main(["--check"]) == 1
    finally:
        _ratio_table.cache_clear()
    assert capsys.readouterr().out == f"{stale}: missing or made for other sampling settings\n"


def test_sparser_tensors_compress_better_and_bad_densities_are_refused():
    assert ratio_from_density("zlib", 0.1) > ratio_from_density("zlib", 0.9) > 0.9
    assert ratio_from_density("rle", 0.05) > ratio_from_density("rle", 0.5)
    assert ratio_from_density("zvc", 0.25) > ratio_from_density("zvc", 0.75)
    assert ratio_from_density("none", 0.1) == 1.0
    with pytest.raises(ValueError, match="not in"):
        ratio_from_density("rle", 1.5)
    with pytest.raises(ValueError, match="unknown algorithm"):
        ratio_from_density("brotli", 0.5)


def test_a_ratio_of_exact_sizes_gives_back_the_exact_size():
    """raw / (raw / size) is size give or take a float ulp: it must not round up to a byte
    more (a --tensors run reported two ratios for its own codec that way)."""
    raw = 16 * 8 * 8 * 64 * 4
    assert [s for s in range(1, raw, 7) if wire_bytes(raw, raw / s) != s] == []
    assert wire_bytes(65536, 1.6) == 40960          # 65536 / 1.6 = 40960.000000000004


def test_wire_bytes_round_up_and_incompressible_data_is_sent_raw():
    assert wire_bytes(1000, 3.0) == 334
    assert wire_bytes(1000, 0.8) == 1000
    assert wire_bytes(1000, 0.8, bypass_incompressible=False) == 1250
    assert wire_bytes(0, 2.0) == 0


@pytest.mark.slow
def test_every_table_entry_matches_a_fresh_sample(capsys):
    from sst_cdma.tools.ratio_table import main

    assert main(["--check"]) == 0
    assert "0 of 3015 entries differ" in capsys.readouterr().out
