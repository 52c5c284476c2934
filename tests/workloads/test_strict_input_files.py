"""The workload's input files (network YAML, plan JSON, layer-times JSON) refuse a key given
twice and explicit YAML tags, in one line naming the file: neither format may keep the later
value silently, and a file holds plain data, never a Python object."""
from __future__ import annotations

import json

import pytest

from sst_cdma.engine.strict_parsing import StrictParseError, json_loads, yaml_loads
from workloads import WorkloadError, load_network
from workloads.layer_times import load_layer_times
from workloads.policies import load_plan_file

TINY = """name: tiny
source: synthetic (tests)
layers:
  - {name: data, kind: data, params: {shape: [3, 8, 8]}}
  - {name: conv1, kind: conv, params: {num_output: 4, kernel_size: 3, pad: 1}}
  - {name: relu1, kind: relu}
"""


def test_the_parsers_refuse_duplicates_and_tags_and_keep_plain_data() -> None:
    assert yaml_loads("a: 1\nb: [x, {c: 2}]\n") == {"a": 1, "b": ["x", {"c": 2}]}
    assert json_loads('{"a": {"b": 1}, "c": 2}') == {"a": {"b": 1}, "c": 2}
    with pytest.raises(StrictParseError, match=r"line 2: duplicate key 'a' \(first on line 1\)"):
        yaml_loads("a: 1\na: 2\n")
    with pytest.raises(StrictParseError, match="duplicate key 'b' in one object"):
        json_loads('{"a": {"b": 1, "b": 2}}')
    with pytest.raises(StrictParseError, match="tag .*python/name:os.system.* not allowed"):
        yaml_loads("a: !!python/name:os.system x\n")
    with pytest.raises(StrictParseError, match="tag '!local' is not allowed"):
        yaml_loads("a: !local [1]\n")


def test_a_network_yaml_with_a_key_twice_is_refused_naming_the_file(tmp_path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.replace("source: synthetic (tests)\n",
                                 "source: synthetic (tests)\nname: other\n"))
    with pytest.raises(WorkloadError, match=r"tiny\.yaml.*duplicate key 'name'") as err:
        load_network(path)
    assert "\n" not in str(err.value)
    path.write_text(TINY)
    assert load_network(path).name == "tiny"


def test_a_network_yaml_with_a_python_tag_is_refused(tmp_path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.replace("source: synthetic (tests)",
                                 "source: !!python/object/apply:os.getcwd []"))
    with pytest.raises(WorkloadError, match=r"tiny\.yaml.*tag .* not allowed"):
        load_network(path)


def test_a_plan_file_with_a_tensor_twice_is_refused(tmp_path) -> None:
    network = load_network("alexnet")
    path = tmp_path / "plan.json"
    path.write_text('{"conv1": "offload", "conv1": "keep"}')
    with pytest.raises(WorkloadError, match=r"plan\.json.*duplicate key 'conv1'"):
        load_plan_file(path, network, 16, "float32")


def test_a_layer_times_file_with_a_key_twice_is_refused(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"format": "sst-cdma-layer-times", "format": "x"}')
    with pytest.raises(WorkloadError, match=r"t\.json.*duplicate key 'format'"):
        load_layer_times(path)
    path.write_text(json.dumps({"format": "x"}))
    with pytest.raises(WorkloadError, match="t.json"):
        load_layer_times(path)


def test_a_regress_suite_with_a_python_tag_is_one_line_naming_the_line(tmp_path) -> None:
    from sst_cdma.tools.regress.suite import load_suite
    from sst_cdma.tools.sweep.marks import SpecError

    (tmp_path / "suite.yaml").write_text(
        "name: t\ncases:\n  - name: a\n    topology: !!python/name:os.system x.py\n")
    with pytest.raises(SpecError, match=r"suite\.yaml:4: the tag '.*python/name.*' is not allowed") as err:
        load_suite(tmp_path)
    assert "\n" not in str(err.value)
