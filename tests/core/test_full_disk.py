"""A full disk (issue #24): ``--output-json``/``--output-config``/``--output-dot`` leave the
previous good file where it was (written aside, then put over it), and a full disk while the
run writes its output folder is one line naming the folder, with the previous one untouched."""
from __future__ import annotations

import errno
import os
import io
import pathlib
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.tools.cli.sst_main import main
from sst_cdma.engine.runner import RunError
from sst_cdma.engine.statistics import outputs

REPO = Path(__file__).resolve().parents[2]
PHOLD = REPO / "topologies" / "phold_torus.py"
OPTIONS = ["--size", "2", "--time-limit", "10ns", "--stats", "csv"]


def fill_the_disk_after(monkeypatch, share: float = 0.5) -> None:
    """From now on ``Path.write_text`` writes part of the text, then finds the disk full."""
    def write_text(self, data, encoding=None, errors=None, newline=None):
        with open(self, "w", encoding=encoding, errors=errors, newline=newline) as fh:
            fh.write(data[:int(len(data) * share)])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


@pytest.mark.parametrize("key", ["output-json", "output-config", "output-dot"])
def test_a_full_disk_leaves_the_previous_graph_file_whole(tmp_path, monkeypatch, key):
    target = tmp_path / f"graph.{key}"
    monkeypatch.chdir(tmp_path)                 # where a run without an output folder writes
    sst_cdma.run(PHOLD, OPTIONS[:4], console=io.StringIO(),
                 **{key.replace("-", "_"): str(target)})
    good = target.read_bytes()
    assert len(good) > 100
    fill_the_disk_after(monkeypatch)
    with pytest.raises(RunError) as err:
        sst_cdma.run(PHOLD, ["--size", "3", *OPTIONS[2:4]], console=io.StringIO(),
                     **{key.replace("-", "_"): str(target)})
    assert str(err.value) == f"--{key} {target}: cannot write it: No space left on device"
    assert target.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]   # no temporary file


def test_a_full_disk_while_writing_the_output_folder_is_one_line(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    argv = ["--output-directory", str(out), str(PHOLD), "--", *OPTIONS]
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    opened = outputs.open if hasattr(outputs, "open") else open

    class Full:
        """A file whose writes find the disk full."""

        def __init__(self, fh):
            self.fh = fh

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    monkeypatch.setattr(outputs, "open", lambda *a, **k: Full(opened(*a, **k)), raising=False)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == (f"sst: --output-directory {out}: cannot write its files: No space left on "
                   "device (the previous outputs, if any, are left as they were)\n")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_error_naming_a_file_of_the_output_folder_names_it_there(tmp_path, monkeypatch):
    out = tmp_path / "out"

    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path).endswith("phold.csv"):
            raise OSError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(RunError) as err:
        sst_cdma.run(PHOLD, OPTIONS, output_directory=out, console=io.StringIO())
    assert str(err.value).startswith(f"--output-directory {out}: cannot write "
                                     f"{out / 'phold.csv'}: Permission denied")
    assert list(tmp_path.iterdir()) == []
