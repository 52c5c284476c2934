"""SST-core 16's structural check: a link created and never connected, or connected on one
side, stops ``sst`` before anything is built, with SST's lines and exit status 1."""
from __future__ import annotations

import pytest

from sst_cdma.tools.cli.sst_main import main
from sst_cdma.engine.runner import StructureRunError, run

REFERENCE = "tests/data/sst-core-16"
FATAL = "FATAL: # SST Core: Structure errors found in the ConfigGraph."


def _reference_lines(repo, name):
    """The reference output up to SST's backtrace, which we do not print."""
    lines = (repo / REFERENCE / name).read_text().splitlines()
    return lines[:lines.index(FATAL) + 1]


@pytest.mark.parametrize("name", ["unused_link", "dangling_link"])
def test_reference_scripts_fail_as_sst_core_16(repo, capsys, name):
    assert main([str(repo / REFERENCE / f"{name}.py")]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() + err.splitlines() == _reference_lines(repo, f"{name}.out")
    assert err == FATAL + "\n"


def test_every_faulty_link_is_listed_in_creation_order(write_script, capsys):
    script = write_script("""
        import sst
        a = sst.Component("a", "testElement.Echo")
        b = sst.Component("b", "testElement.Echo")
        first = sst.Link("first")
        ok = sst.Link("ok", "1ns")
        ok.connect((a, "port"), (b, "port"))
        half = sst.Link("half", "1ns")
        a2 = sst.Component("a2", "testElement.Echo")
        a2.addLink(half, "port")
        last = sst.Link("last")
    """)
    assert main([str(script)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "WARNING:  Found unused link: first",
        "WARNING:  Found dangling link: half.  It is connected on one side to component a2.",
        "WARNING:  Found unused link: last"]
    assert err == FATAL + "\n"


def test_nothing_is_built_or_written(write_script, tmp_path):
    script = write_script("""
        import sst
        a = sst.Component("a", "testElement.Echo")
        sst.Link("l0")
    """)
    with pytest.raises(StructureRunError) as info:
        run(script, output_directory=tmp_path / "out", output_json="g.json")
    assert info.value.warnings == ["Found unused link: l0"]
    assert not (tmp_path / "out").exists()


def test_structure_is_checked_before_element_types(write_script, capsys):
    # SST looks element types up when it builds components, after the structural check
    script = write_script("""
        import sst
        a = sst.Component("a", "nosuchlib.Thing")
        a.addParams({"x": 1})
        sst.Link("l0")
    """)
    assert main([str(script)]) == 1
    out, err = capsys.readouterr()
    assert out == "WARNING:  Found unused link: l0\n" and err == FATAL + "\n"


def test_an_unknown_element_alone_is_one_line_naming_the_script_line(write_script, capsys):
    script = write_script("""
        import sst
        a = sst.Component("a", "nosuchlib.Thing")
        a.addParams({"x": 1})
        a.enableAllStatistics()
    """)
    assert main([str(script)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"sst: {script}:3: unknown element library 'nosuchlib' (available: cdma, " \
                  "coreTestElement, testElement)\n"


def test_a_graph_file_with_a_dangling_link_fails_the_same_way(tmp_path, capsys):
    import json

    graph = {"program_options": {}, "components": [
        {"name": "a", "type": "testElement.Echo", "params": {}}],
        "links": [{"name": "half", "noCut": False, "nonlocal": False,
                   "left": {"component": "a", "port": "port", "latency": "1 ns"}}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    assert main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "WARNING:  Found dangling link: half.  It is connected on one side to " \
                  "component a.\n"
    assert err == FATAL + "\n"
