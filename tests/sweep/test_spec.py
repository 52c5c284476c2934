"""Sweep specs: expansion into points, and every malformed spec rejected with file and line
before anything runs."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sst_cdma.tools.sweep import SpecError, load_spec, run_sweep
from sst_cdma.tools.sweep.validate import validate_points

REPO = Path(__file__).resolve().parents[2]


def test_grid_points_and_params_expand_in_spec_order(counting):
    spec = load_spec(counting.spec("""
        name: demo
        topology: {script}
        options: {value: 2.5}
        grid:
          n: [1, 2]
          mode: [a, b]
        points:
          - {n: 7, mode: b, value: 9}
        params:
          "probe": {seed: [3, 4]}
    """))
    assert spec.name == "demo"
    assert len(spec.points) == (2 * 2 + 1) * 2
    first, last = spec.points[0], spec.points[-1]
    assert first.model_options() == ["--value", "2.5", "--n", "1", "--mode", "a"]
    assert first.overrides() == {"probe": {"seed": "3"}}
    assert spec.points[1].overrides() == {"probe": {"seed": "4"}}
    assert spec.points[2].model_options()[-1] == "b"          # mode varies faster than n
    assert last.model_options() == ["--value", "9", "--n", "7", "--mode", "b"]
    assert last.line == 8                                      # the explicit point's line
    assert first.columns() == {"topology": "counting.py", "opt.value": 2.5, "opt.n": 1,
                               "opt.mode": "a", "param.probe.seed": 3}
    assert [p.index for p in spec.points] == list(range(10))


def test_exclude_defaults_to_per_layer_detail(counting):
    from sst_cdma.tools.sweep.spec import DEFAULT_EXCLUDE

    spec = load_spec(counting.spec("topology: {script}\noptions: {n: 1}\n"))
    assert spec.exclude == DEFAULT_EXCLUDE
    spec = load_spec(counting.spec("topology: {script}\noptions: {n: 1}\nexclude: [gpus.*]\n"))
    assert spec.exclude == ("gpus.*",)


def test_boolean_options_are_flags(counting):
    spec = load_spec(counting.spec("""
        topology: {script}
        grid:
          fail: [true, false]
          n: [1]
    """))
    assert spec.points[0].model_options() == ["--fail", "--n", "1"]
    assert spec.points[1].model_options() == ["--n", "1"]


def test_options_naming_files_run_with_absolute_paths_and_show_as_written(counting):
    (counting.folder / "inputs").mkdir()
    (counting.folder / "inputs" / "v.txt").write_text("2")
    (counting.folder / "a").mkdir()  # a folder named like a bare value is not taken for it
    spec = load_spec(counting.spec("""
        topology: {script}
        options: {data: inputs/v.txt, mode: a, value: 0.5}
        grid: {n: [1]}
        """))
    point = spec.points[0]
    assert point.files == (("data", str(counting.folder / "inputs" / "v.txt")),)
    assert point.model_options() == ["--data", str(counting.folder / "inputs" / "v.txt"),
                                     "--mode", "a", "--value", "0.5", "--n", "1"]
    assert point.model_options(as_written=True)[:2] == ["--data", "inputs/v.txt"]
    assert point.describe().startswith(f"{counting.script.name} --data inputs/v.txt")
    assert point.columns()["opt.data"] == "inputs/v.txt"


def test_topology_per_point(counting, tmp_path):
    other = tmp_path / "other.py"
    other.write_text(counting.script.read_text())
    spec = load_spec(counting.spec("""
        grid:
          topology: [{script}, other.py]
          n: [1]
    """))
    assert [p.topology_name for p in spec.points] == ["counting.py", "other.py"]
    assert spec.points[1].topology == other.resolve()


@pytest.mark.parametrize("body, line, words", [
    ("topology: {script}\nbogus: 1\n", 2, "unknown key 'bogus'"),
    ("topology: {script}\ngird:\n  n: [1]\n", 2, "unknown key 'gird' (did you mean 'grid'?)"),
    ("topology: {script}\ngrid:\n  n: 3\n", 3, "must be a list"),
    ("topology: {script}\ngrid:\n  n: []\n", 3, "empty"),
    ("topology: missing.py\ngrid:\n  n: [1]\n", 1, "not found"),
    ("topology: .\ngrid:\n  n: [1]\n", 1, "topology script '.' is a folder"),
    ("topology: {script}\npoints:\n  - {n: 1, param: {probe: {seed: 1}}}\n", 3,
     "option 'param' must be a single value, not a mapping (did you mean params?)"),
    ("grid:\n  n: [1]\n", 1, "no topology"),
    ("topology: ''\n", 1, "path to a topology"),
    ("topology: {script}\noptions:\n  n: [1, 2]\n", 3, "single value"),
    ("topology: {script}\noptions: [n, 1]\n", 2, "must be a mapping"),
    ("topology: {script}\ngrid:\n  --n: [1]\n", 3, "without its dashes"),
    ("topology: {script}\noptions: {n: 1}\ngrid:\n  n: [2]\n", 4, "also fixed"),
    ("topology: {script}\npoints:\n  - {n: 1}\n  - {n: 1}\n", 4, "repeats point 0"),
    ("topology: {script}\ngrid: {n: [1], mode: [b]}\npoints:\n  - {mode: b, n: 1}\n", 4,
     "repeats point 0"),
    ("topology: {script}\npoints:\n  - {n: 1, params: {probe: {seed: 1, count: 2}}}\n"
     "  - {params: {probe: {count: 2, seed: 1}}, n: 1}\n", 4, "repeats point 0"),
    ("topology: {script}\npoints:\n  - 5\n", 3, "mapping"),
    ("topology: {script}\nparams:\n  probe: 3\n", 3, "must be a mapping"),
    ("topology: {script}\nstatistics: [nodot]\n", 2, "STATISTIC.FIELD"),
    ("topology: {script}\ngrid:\n  n: [1\n", 4, "invalid YAML"),
    ("topology: {script}\ntopology: {script}\n", 2, "duplicate key"),
])
def test_malformed_specs_name_file_and_line(counting, body, line, words):
    path = counting.spec(body)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.line == line, str(info.value)
    assert words in str(info.value)
    assert str(info.value).startswith(f"{info.value.where}: ")
    assert "spec.yaml" in info.value.where


def test_unknown_option_rejected_up_front_with_its_line(counting, tmp_path):
    path = counting.spec("""
        topology: {script}
        grid:
          n: [1, 2]
          colour: [red]
    """)
    with pytest.raises(SpecError) as info:
        run_sweep(path, output=tmp_path / "out", progress=False)
    assert info.value.line == 4
    assert "--colour" in str(info.value) and "unrecognized" in str(info.value)
    assert not (tmp_path / "out").exists()        # nothing ran, no cluster started
    assert counting.total() == 0


def test_bad_value_rejected_up_front_with_the_value_line(counting, tmp_path):
    path = counting.spec("""
        topology: {script}
        options: {value: 1}
        grid:
          mode: [a, b]
          n: [1, two]
    """)
    with pytest.raises(SpecError) as info:
        run_sweep(path, output=tmp_path / "out", progress=False)
    assert info.value.line == 5
    assert "invalid int value: 'two'" in str(info.value)
    assert "point 1" in str(info.value)
    assert counting.total() == 0 and not (tmp_path / "out").exists()


def test_options_that_contradict_one_another_are_rejected_up_front(tmp_path):
    """Issue #34: options each valid alone but not together (``--weights nvme`` with the
    optimizer states on the GPU) were caught only when the point's elements were built in its
    run, and became a failed point; the up-front check builds them too."""
    path = tmp_path / "spec.yaml"
    path.write_text(f"""topology: {REPO / 'topologies' / 'pascal_cdma.py'}
options:
  network: digits_cnn
  optimizer: adam
  nvme: 1
  no-baselines: true
grid:
  weights: [gpu, nvme]
""")
    with pytest.raises(SpecError) as info:
        run_sweep(path, output=tmp_path / "out", progress=False)
    message = str(info.value)
    assert message.startswith(f"{path}:8: point 1 (")
    assert "--weights nvme" in message.split("): ", 1)[0]      # the point's options
    assert message.endswith("--weights nvme: the update kernels on the GPU read and write the "
                            "weights; with the weights off the GPU the host CPU steps them, "
                            "which needs --optimizer-states host or nvme")
    assert not (tmp_path / "out").exists()        # nothing ran, no cluster started


def test_override_matching_nothing_is_rejected(counting):
    spec = load_spec(counting.spec("""
        topology: {script}
        options: {n: 1}
        params:
          "gpu*": {throughput: ["8GB/s"]}
    """))
    with pytest.raises(SpecError) as info:
        validate_points(str(spec.path), spec.points)
    assert info.value.line == 4
    assert "no component matches 'gpu*'" in str(info.value)


def test_override_of_unknown_param_names_its_line(counting):
    spec = load_spec(counting.spec("""
        topology: {script}
        options: {n: 1}
        params:
          probe: {colour: [blue]}
    """))
    with pytest.raises(SpecError) as info:
        validate_points(str(spec.path), spec.points)
    assert info.value.line == 4
    assert "colour" in str(info.value)


def test_validation_leaves_no_files_behind(counting):
    spec = load_spec(counting.spec("topology: {script}\noptions: {n: 1}\n"))
    validate_points(str(spec.path), spec.points)
    assert not (counting.folder / "summary.json").exists()     # written in a scratch folder
    assert counting.total() == 0


#: shipped specs whose every point check builds many or large systems (throughput.yaml: eight
#: 64-GPU DGX points; today_links.yaml: 72 GH200 points); validate_points runs in the default
#: tier on the others, today.yaml's GH200 points and switch.yaml's DGX ones among them
LARGE_SPECS = {"throughput.yaml", "today_links.yaml"}


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in LARGE_SPECS else [])
    for p in sorted((REPO / "sweeps").glob("*.yaml"))])
def test_shipped_specs_parse(path):
    spec = load_spec(path, check_files=False)
    assert spec.points
    topologies = {p.topology for p in spec.points}
    if all(t.is_file() for t in topologies):       # the model's topologies may not exist yet
        load_spec(path)
        validate_points(str(path), spec.points)


@settings(max_examples=25, deadline=None)
@given(axes=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=3),
       params=st.integers(min_value=0, max_value=3), explicit=st.integers(0, 2))
def test_expansion_size_and_order_property(tmp_path_factory, axes, params, explicit):
    folder = tmp_path_factory.mktemp("prop")
    (folder / "t.py").write_text("import sst\n")
    lines = ["topology: t.py", "grid:"]
    lines += [f"  a{i}: [{', '.join(str(v) for v in range(n))}]" for i, n in enumerate(axes)]
    if explicit:
        lines.append("points:")
        lines += [f"  - {{a0: {100 + k}}}" for k in range(explicit)]
    if params:
        lines += ["params:", f"  c: {{p: [{', '.join(str(v) for v in range(params))}]}}"]
    (folder / "s.yaml").write_text("\n".join(lines) + "\n")
    spec = load_spec(folder / "s.yaml")
    grid = 1
    for n in axes:
        grid *= n
    assert len(spec.points) == (grid + explicit) * max(1, params)
    assert [p.index for p in spec.points] == list(range(len(spec.points)))
    assert len({p.identity() for p in spec.points}) == len(spec.points)
    first = spec.points[0].model_options()
    assert first == [x for i in range(len(axes)) for x in (f"--a{i}", "0")]
    if explicit:
        assert spec.points[-1].model_options()[:2] == ["--a0", str(100 + explicit - 1)]


def test_params_naming_files_run_with_absolute_paths_and_show_as_written(counting):
    (counting.folder / "prof").mkdir()
    (counting.folder / "prof" / "b.json").write_text("{}")
    spec = load_spec(counting.spec("""
        topology: {script}
        options: {n: 1}
        params:
          "gpu*.dma": {profile: [prof/b.json, alexnet, prof/none.json]}
        """))
    named, bare, missing = spec.points
    absolute = str(counting.folder / "prof" / "b.json")
    assert named.param_files == (("gpu*.dma", "profile", absolute),)
    assert named.overrides() == {"gpu*.dma": {"profile": absolute}}       # run with it
    assert named.overrides()["gpu*.dma"]["profile"].written == "prof/b.json"
    assert named.overrides(as_written=True) == {"gpu*.dma": {"profile": "prof/b.json"}}
    assert named.canonical_overrides() == {"gpu*.dma": {"profile": "prof/b.json"}}
    assert named.columns()["param.gpu*.dma.profile"] == "prof/b.json"      # shown as written
    assert "gpu*.dma.profile=prof/b.json" in named.describe()
    assert named.named_files() == {'params:["gpu*.dma", "profile"]': absolute}
    for point in (bare, missing):                   # a bare name, or no such file: as written
        assert point.param_files == () and point.named_files() == {}
        assert point.overrides() == point.overrides(as_written=True)


@pytest.mark.parametrize("body, line, words", [
    ("grid: {n: [16, 16.0, 1.6e1]}\n", 2, "point 1 (counting.py --n 16.0) repeats point 0 "
                                          "(line 2): n 16.0 and 16 are the same number"),
    ("grid:\n  n:\n    - 16\n    - 32\n    - 1.6e1\n", 6,
     "point 2 (counting.py --n 1.6e1) repeats point 0 (line 4): n 1.6e1 and 16 are the same"),
    ("grid: {n: [2, 3]}\npoints:\n  - {n: '3.0'}\n", 4, "repeats point 1 (line 2): n 3.0 and 3"),
    ("options: {n: 1}\nparams:\n  probe:\n    seed: [7, 7.0]\n", 5,
     "repeats point 0 (line 5): probe.seed 7.0 and 7 are the same number"),
    ("options: {n: 1}\ngrid: {value: [0.5, 5e-1, 0.50]}\n", 3, "value 5e-1 and 0.5"),
    ("options: {n: 1}\ngrid: {value: [-0.0, 0]}\n", 3, "value 0 and -0.0"),
])
def test_numbers_equal_in_value_are_one_point(counting, body, line, words):
    path = counting.spec("topology: {script}\n" + body)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.line == line, str(info.value)
    assert words in str(info.value), str(info.value)
    assert str(info.value).startswith(f"{info.value.where}: ")


def test_numbers_that_differ_stay_separate_points(counting):
    spec = load_spec(counting.spec("topology: {script}\ngrid:\n  n: [16, 1.6, 160, 16a, "
                                   "'0x10', 1e-16]\n  fail: [true, 'true', 1]\n"))
    assert len(spec.points) == 18
    assert len({p.identity() for p in spec.points}) == 18


def test_validation_errors_show_files_as_written(counting, monkeypatch):
    (counting.folder / "inputs").mkdir()            # a folder the script opens as a file
    counting.spec("topology: {script}\noptions:\n  n: 1\n  data: inputs/\n")
    monkeypatch.chdir(counting.folder)
    with pytest.raises(SpecError) as info:
        validate_points("spec.yaml", load_spec("spec.yaml").points)
    opens = next(n for n, text in enumerate(counting.script.read_text().splitlines(), 1)
                 if "open(args.data)" in text)      # the script's line that fails
    assert str(info.value) == ("spec.yaml:4: point 0 (counting.py --n 1 --data inputs/): "
                               f"counting.py:{opens}: IsADirectoryError: [Errno 21] Is a "
                               "directory: 'inputs/'")
    assert str(counting.folder) not in str(info.value)
    assert info.value.line == 4                     # the option naming it


PASCAL = Path(__file__).resolve().parents[2] / "topologies" / "pascal_cdma.py"


@pytest.mark.parametrize("pattern,param,option", [
    ("*gpu0:workload*", "batch", "batch"), ("*:workload*", "network", "network"),
    ("gpu0:workload[[]0]", "seq_len", "seq-len"),
])
def test_a_param_a_model_option_sets_is_refused_naming_the_option(tmp_path, pattern, param,
                                                                     option):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"topology: {PASCAL}\noptions: {{network: alexnet, batch: 32}}\n"
                    f"params:\n  \"{pattern}\": {{{param}: [64]}}\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        validate_points(str(spec), load_spec(spec).points)
    assert info.value.line == 4
    assert f"sets the workload's {param!r} behind the model options' backs" in str(info.value)
    assert f"set the model option {option!r} (options: or grid:) instead" in str(info.value)


def test_a_main_workload_the_baselines_would_not_follow_is_refused_before_running(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"topology: {PASCAL}\noptions: {{network: alexnet, batch: 32}}\n"
                    "params:\n  \"gpu0:workload[[]0]\": {workspace: [1GiB]}\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        validate_points(str(spec), load_spec(spec).points)
    assert "workload param 'workspace' was set to '1GiB'" in str(info.value)
    assert "the baselines would run the old workload" in str(info.value)


def test_a_spec_expanding_past_the_point_limit_is_refused_at_once(counting):
    # 100 x 100 x 150 = 1.5 million points: counted, not expanded
    axes = ", ".join(f"a{i}: [{', '.join(str(v) for v in range(n))}]"
                     for i, n in enumerate((100, 100, 150)))
    path = counting.spec(f"topology: {{script}}\ngrid: {{{axes}}}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "expands to 1,500,000 points, more than the limit of 10000: set max_points: " \
        "1500000 to run them all" in str(info.value)


def test_max_points_allows_more_and_refuses_bad_values(counting):
    grid = "grid: {n: [1, 2, 3]}\n"
    with pytest.raises(SpecError) as info:
        load_spec(counting.spec("topology: {script}\nmax_points: 2\n" + grid))
    assert info.value.line == 2 and "expands to 3 points, more than the spec's max_points (2)" \
        in str(info.value)
    assert len(load_spec(counting.spec("topology: {script}\nmax_points: 3\n" + grid)).points) == 3
    with pytest.raises(SpecError, match="max_points must be a whole number >= 1, not str"):
        load_spec(counting.spec("topology: {script}\nmax_points: many\n" + grid))


def test_the_sweep_says_how_many_points_before_checking_them(counting, tmp_path):
    import io

    log = io.StringIO()
    with pytest.raises(SpecError, match="no component matches"):   # found while checking
        run_sweep(counting.spec("topology: {script}\ngrid: {n: [1, 2]}\n"
                                "params: {nothing: {x: 1}}\n"), tmp_path / "out",
                  progress=False, log=log)
    assert log.getvalue() == ("spec: 2 points, 2 to run (0 cached); checking each point's "
                              "options and params first\n")
