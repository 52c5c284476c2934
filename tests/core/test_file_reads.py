"""Every file the project reads goes through one opener and the strict loader. Each test states
the attack it stands for; the readers' tables below hold every kind of file the project reads, so
a reader added without the opener shows up here.

- A FIFO named as an input blocked the run forever (nothing ever writes to it): it is refused
  at once, from the open descriptor (no check-then-open race), opening it without blocking.
- ``/dev/zero`` (an endless device) ran the process out of memory: only a regular file is read.
- A huge file is refused with its size and the limit of its kind, before it is read.
- JSON/YAML whose value depends on which of two duplicate keys wins, nesting deep enough to
  crash the parser or the code walking it (RecursionError), an integer past Python's digit
  limit (ValueError traceback), NaN and infinities where a number is expected: one line each.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from sst_cdma.engine.file_reads import (FileKind, FileReadError, load_json, load_yaml, open_regular,
                                 read_bytes, read_text)
from sst_cdma.engine.strict_parsing import StrictParseError, json_loads, yaml_loads

TINY = FileKind("a test file", 64)
#: seconds a refusal may take: the attack blocked forever
PROMPT_S = 10


def _promptly(call: Callable[[], Any]) -> BaseException:
    """Run ``call`` in a daemon thread and return what it raised; fail when it is still running
    after :data:`PROMPT_S` (it blocked: the attack worked) or when it raised nothing."""
    outcome: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(PROMPT_S)
    assert not thread.is_alive(), "the read blocked"
    assert outcome, "the read was accepted"
    return outcome[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A FIFO no one writes to."""
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


# -- the opener --------------------------------------------------------------------------------
@pytest.mark.parametrize("read", [read_bytes, read_text, load_json, load_yaml, open_regular])
def test_a_fifo_is_refused_at_once(fifo, read):
    exc = _promptly(lambda: read(fifo, TINY))
    assert isinstance(exc, FileReadError) and "FIFO" in str(exc) and not exc.missing


def test_a_symlink_to_a_fifo_is_refused_too(fifo, tmp_path):
    link = tmp_path / "innocent.json"
    link.symlink_to(fifo)
    exc = _promptly(lambda: read_text(link, TINY))
    assert isinstance(exc, FileReadError) and "FIFO" in str(exc)


@pytest.mark.parametrize("device, fault", [("/dev/zero", "character device"),
                                           ("/dev/null", "character device")])
def test_a_device_is_refused_rather_than_read_without_end(device, fault):
    exc = _promptly(lambda: read_bytes(device, FileKind("a test file", 1 << 40)))
    assert isinstance(exc, FileReadError) and fault in str(exc)


def test_a_folder_and_a_missing_file_are_named_as_such(tmp_path):
    with pytest.raises(FileReadError, match="^is a folder, not a file$"):
        read_text(tmp_path, TINY)
    with pytest.raises(FileReadError, match="^no such file$") as info:
        read_text(tmp_path / "absent", TINY)
    assert info.value.missing


def test_a_file_over_its_kinds_limit_is_refused_with_its_size_and_the_limit(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 64)
    assert read_bytes(path, TINY) == b" " * 64  # at the limit: read
    path.write_bytes(b" " * (3 * 1024 * 1024 + 512 * 1024))
    with pytest.raises(FileReadError) as info:
        read_bytes(path, FileKind("a CPU-Adam file", 1024 * 1024))
    assert str(info.value) == "is 3.5 MiB, over the 1 MiB limit for a CPU-Adam file"


def test_text_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(FileReadError, match=r"^not UTF-8 text \(byte 0xe9 at offset 9\)$") \
            as info:
        read_text(path, TINY)
    assert info.value.parsing


# -- the strict loader -------------------------------------------------------------------------
@pytest.mark.parametrize("text, fault", [
    ('{"a": 1, "a": 2}', "duplicate key 'a' in one object"),
    ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
    ("[" * 150 + "]" * 150, "nested too deeply"),  # parses, but deeper than any file needs
    ("1" * 5000, "more than 4300 digits"),
    ('{"x": NaN}', "NaN is not a number JSON allows"),
    ('{"x": -Infinity}', "-Infinity is not a number JSON allows"),
    ('{"x": 1e400}', "the number 1e400 is too large for a float"),
])
def test_json_that_parses_ambiguously_or_crashes_the_parser_is_one_line(text, fault):
    with pytest.raises(StrictParseError) as info:
        json_loads(text)
    assert fault in str(info.value) and "\n" not in str(info.value)


def test_nan_is_read_where_a_reader_asks_for_it():
    assert json.dumps(json_loads('{"x": NaN}', finite=False)) == '{"x": NaN}'


@pytest.mark.parametrize("text, fault", [
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ("x: !!python/object/apply:os.system [ls]\n", "is not allowed"),
    ("x: !custom 1\n", "the tag '!custom' is not allowed"),
    ("x: " + "1" * 5000 + "\n", "more than 4300 digits"),
    ("x: " + "[" * 200_000, "nested too deeply"),
    ("x: " + "[" * 150 + "]" * 150 + "\n", "nested too deeply"),
])
def test_yaml_that_parses_ambiguously_or_crashes_the_parser_is_one_line(text, fault):
    with pytest.raises(StrictParseError) as info:
        yaml_loads(text)
    assert fault in str(info.value) and "\n" not in str(info.value)


# -- every reader of the project ---------------------------------------------------------------
class _PointNaming:
    """The little of a sweep point :func:`~sst_cdma.tools.sweep.keys.key_of` reads: one option naming
    ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def named_files(self) -> dict[str, str]:
        return {"cpu-adam-file": str(self.path)}

    def describe(self) -> str:
        return "topo.py --cpu-adam-file " + str(self.path)

    def canonical_options(self) -> list[str]:
        return ["--cpu-adam-file", str(self.path)]

    def canonical_overrides(self) -> dict[str, Any]:
        return {}


def _key_of_a_point_naming(path: Path) -> str:
    from sst_cdma.tools.sweep.keys import key_of

    return key_of(_PointNaming(path), "0" * 64, inputs="0" * 64)


def _point_statistics(path: Path) -> Any:
    """A sweep point's run_statistics.csv, made a link to ``path``."""
    from sst_cdma.tools.sweep.execute import STATISTICS
    from sst_cdma.tools.sweep.table import read_statistics

    folder = path.parent / "point"
    folder.mkdir()
    (folder / STATISTICS).symlink_to(path)
    return read_statistics(folder)


def _readers() -> dict[str, Callable[[Path], Any]]:
    """Each kind of file the project reads -> a call that reads ``path`` as that kind."""
    from sst_cdma.model.calibration import _read as read_measurements
    from sst_cdma.model.cpu_adam import load_cpu_adam
    from sst_cdma.model.fitted import _read_json as read_params
    from sst_cdma.profiles.model_states import load_model_states
    from sst_cdma.profiles.profile import DensityProfile
    from sst_cdma.profiles.samples import load_sample_set, read_npz
    from sst_cdma.tools.regress.run import read_reference_file
    from sst_cdma.engine.runner import execute_script
    from sst_cdma.engine.statistics import read_statistics
    from sst_cdma.tools.sweep.marks import load_located
    from sst_cdma.tools.sweep.point_plots import read_summary
    from sst_cdma.tools.sweep.table import read_results
    from workloads.layer_times import load_layer_times
    from workloads.loader import load_network
    from workloads.stream import read_stream

    return {
        "CPU-Adam file": load_cpu_adam,
        "model-state profile": load_model_states,
        "density profile": DensityProfile.load,
        "samples (.npz)": read_npz,
        "samples folder or .npz": load_sample_set,
        "regress reference": read_reference_file,
        "configuration graph": lambda p: execute_script(p.with_suffix(".json")),
        "topology script": lambda p: execute_script(p.with_suffix(".py")),
        "statistics file": lambda p: read_statistics(p.with_suffix(".csv")),
        "sweep spec or suite": load_located,
        "file a sweep point names": _key_of_a_point_naming,
        "point statistics table": _point_statistics,
        "point summary": read_summary,
        "results table": read_results,
        "layer times": load_layer_times,
        "network file": lambda p: load_network(p.with_suffix(".yaml")),
        "workload stream": read_stream,
        "measurements CSV": lambda p: read_measurements(str(p), ["x"]),
        "kernel parameters": lambda p: read_params(str(p), "kernel parameters"),
    }


READERS = sorted(_readers())


@pytest.mark.parametrize("kind", READERS)
def test_every_reader_refuses_a_fifo_at_once_naming_it(tmp_path, kind):
    """The attack: a FIFO given where a file is read (``--cpu-adam-file``, a graph's
    ``adam_file``, a sweep spec, ``read_statistics``...) blocked the process forever."""
    read = _readers()[kind]
    stem = tmp_path / "input"
    for suffix in (".json", ".py", ".csv", ".yaml"):  # what the reader's path may end with
        os.mkfifo(stem.with_suffix(suffix))
    exc = _promptly(lambda: read(stem.with_suffix(".json")))
    assert isinstance(exc, ValueError) or type(exc).__name__.endswith("Error")
    named = "input." in str(exc) or "run_statistics.csv" in str(exc)  # the file, or the link
    assert named and "FIFO" in str(exc), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc)


@pytest.mark.parametrize("kind", READERS)
def test_every_reader_refuses_an_endless_device(tmp_path, kind):
    """The attack: ``/dev/zero`` where a file is read ran the process out of memory."""
    read = _readers()[kind]
    stem = tmp_path / "input"
    for suffix in (".json", ".py", ".csv", ".yaml"):
        stem.with_suffix(suffix).symlink_to("/dev/zero")
    exc = _promptly(lambda: read(stem.with_suffix(".json")))
    assert "character device" in str(exc), f"{type(exc).__name__}: {exc}"


# -- the files read with json.loads before -----------------------------------------------------
def _cpu_adam_with_a_duplicate_key(tmp_path: Path) -> Path:
    from sst_cdma.model.cpu_adam import DEFAULT_CPU_ADAM

    text = DEFAULT_CPU_ADAM.read_text(encoding="utf-8")
    path = tmp_path / "adam.json"
    path.write_text(text.replace("{", '{"date": "x",', 1), encoding="utf-8")
    return path


def test_a_cpu_adam_file_with_a_key_given_twice_is_refused(tmp_path):
    """The attack: which of two values a reader keeps decides the step time (``json.loads``
    kept the last silently)."""
    from sst_cdma.model.cpu_adam import CpuAdamError, load_cpu_adam

    path = _cpu_adam_with_a_duplicate_key(tmp_path)
    with pytest.raises(CpuAdamError, match=r"adam.json: not a JSON file: duplicate key 'date'"):
        load_cpu_adam(path)


def test_a_model_state_profile_with_a_key_given_twice_is_refused(tmp_path):
    from sst_cdma.profiles import ProfileError
    from sst_cdma.profiles.model_states import load_model_states

    shipped = Path(__file__).resolve().parents[2] / "workloads" / "profiles" / "model_states"
    text = (shipped / "text_relu_small.json").read_text(encoding="utf-8")
    path = tmp_path / "states.json"
    path.write_text(text.replace("{", '{"model": "other",', 1), encoding="utf-8")
    with pytest.raises(ProfileError, match=r"states.json: not a JSON file: duplicate key 'model'"):
        load_model_states(path)


def test_a_cpu_adam_file_over_its_limit_is_refused_before_it_is_read(tmp_path):
    from sst_cdma.model.cpu_adam import CPU_ADAM_FILE, CpuAdamError, load_cpu_adam

    path = tmp_path / "adam.json"
    with open(path, "wb") as fh:
        fh.truncate(CPU_ADAM_FILE.limit + 1)  # sparse: no disk used
    with pytest.raises(CpuAdamError) as info:
        load_cpu_adam(path)
    assert str(info.value) == (f"{path}: cannot read: is 1048577 bytes, over the 1 MiB "
                               "(1048576 bytes) limit for a CPU-Adam file")  # not "1.0 MiB"
