"""A corpus of deliberately broken topology scripts (``broken/``): each must fail with one line
on stderr that names the file (and line) and the fault, exit 1, and print no traceback. The
expected message is the regular expression in the script's first line (``# expect: ...``)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sst_cdma.tools.cli.sst_main import main

BROKEN = sorted((Path(__file__).parent / "broken").glob("*.py"))


@pytest.mark.parametrize("script", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_script_gives_one_line_error(script, capsys):
    expect = script.read_text().splitlines()[0].removeprefix("# expect: ")
    code = main([str(script)])
    captured = capsys.readouterr()
    assert code == 1
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("sst: "), lines[0]
    assert script.name in lines[0], lines[0]
    assert re.search(expect, lines[0]), f"{lines[0]!r} does not match {expect!r}"
    assert "Traceback" not in captured.err


def test_corpus_is_not_empty():
    assert len(BROKEN) >= 15


def test_a_script_that_is_not_utf8_is_one_line_naming_it(tmp_path, capsys):
    script = tmp_path / "latin1.py"
    script.write_bytes(b"import sst\n# caf\xe9\n")
    assert main([str(script)]) == 1
    err = capsys.readouterr().err
    assert err == (f"sst: {script}: cannot read topology script: not UTF-8 text "
                   f"(byte 0xe9 at offset 16)\n")
