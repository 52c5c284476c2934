"""Cache keys change with everything that determines a result, and only with that."""
from __future__ import annotations

import sst_cdma
from sst_cdma.tools.sweep.keys import (digest_tree, file_digest, inputs_digest, point_key,
                                 script_digest)


def test_key_depends_on_options_overrides_inputs_and_version(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import sst\n")
    sha = script_digest(script)
    base = point_key(sha, ["--n", "1"], {}, "inputs", "1.0")
    assert base == point_key(sha, ["--n", "1"], {}, "inputs", "1.0")
    assert len(base) == 24 and int(base, 16) >= 0
    variants = [point_key(sha, ["--n", "2"], {}, "inputs", "1.0"),
                point_key(sha, ["--n", "1"], {"c": {"p": "1"}}, "inputs", "1.0"),
                point_key(sha, ["--n", "1"], {}, "other inputs", "1.0"),
                point_key(sha, ["--n", "1"], {}, "inputs", "1.1"),
                point_key("0" * 64, ["--n", "1"], {}, "inputs", "1.0")]
    assert len(set(variants + [base])) == len(variants) + 1


def test_key_follows_the_content_of_files_options_name(tmp_path):
    sha = "0" * 64
    plain = point_key(sha, ["--n", "1"], {}, "inputs", "1.0")
    assert point_key(sha, ["--n", "1"], {}, "inputs", "1.0", files={}) == plain  # old keys hold
    data = tmp_path / "v.json"
    data.write_text("1")
    first = point_key(sha, ["--n", "1"], {}, "inputs", "1.0", files={"d": file_digest(data)})
    assert first != plain
    assert point_key(sha, ["--n", "1"], {}, "inputs", "1.0",
                     files={"d": file_digest(data)}) == first
    data.write_text("2")
    assert point_key(sha, ["--n", "1"], {}, "inputs", "1.0",
                     files={"d": file_digest(data)}) != first
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "a.npy").write_bytes(b"x")
    before = file_digest(tmp_path / "samples")
    (tmp_path / "samples" / "a.npy").write_bytes(b"y")
    assert file_digest(tmp_path / "samples") != before


def test_default_inputs_and_version_are_the_package_s(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import sst\n")
    sha = script_digest(script)
    assert point_key(sha, [], {}) == point_key(sha, [], {}, inputs_digest(), sst_cdma.__version__)


def test_script_digest_follows_sibling_imports(tmp_path):
    helper = tmp_path / "helper_mod.py"
    helper.write_text("X = 1\n")
    script = tmp_path / "t.py"
    script.write_text("import sst\nfrom helper_mod import X\nimport os\n")
    before = script_digest(script)
    helper.write_text("X = 2\n")
    assert script_digest(script) != before
    unrelated = tmp_path / "unrelated.py"
    unrelated.write_text("Y = 1\n")
    after = script_digest(script)
    unrelated.write_text("Y = 2\n")
    assert script_digest(script) == after


def test_tree_digest_sees_every_model_input_but_not_caches(tmp_path):
    (tmp_path / "networks").mkdir()
    (tmp_path / "networks" / "vgg16.yaml").write_text("layers: []\n")
    (tmp_path / "__pycache__").mkdir()
    before = digest_tree(tmp_path)
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert digest_tree(tmp_path) == before
    (tmp_path / "networks" / "vgg16.yaml").write_text("layers: [conv]\n")
    assert digest_tree(tmp_path) != before
    (tmp_path / "networks" / "vgg16.yaml").write_text("layers: []\n")
    (tmp_path / "networks" / "vgg19.yaml").write_text("layers: []\n")
    assert digest_tree(tmp_path) != before


def test_inputs_digest_covers_the_model_not_the_tools():
    from sst_cdma.tools.sweep.keys import TOOL_PACKAGES, _files, _package_dir

    root = _package_dir("sst_cdma")
    names = {p.relative_to(root).as_posix() for p in _files(root, TOOL_PACKAGES)}
    assert {"engine/kernel.py", "engine/simulation.py", "engine/testelements/phold.py",
            "model/kernel_model.py", "builder/topology.py"} <= names
    assert not any(n.startswith("tools/") for n in names)
    workloads = _package_dir("workloads")
    assert workloads is not None and any(_files(workloads))
    assert len(inputs_digest()) == 64


def test_option_order_is_not_part_of_the_key(counting):
    from sst_cdma.tools.sweep import load_spec
    from sst_cdma.tools.sweep.keys import key_of, script_digest

    sha = script_digest(counting.script)
    one = load_spec(counting.spec("topology: {script}\noptions: {n: 1, mode: b, value: 2}\n"
                                  "params: {probe: {seed: 3, count: 4}}\n", "one.yaml"))
    two = load_spec(counting.spec("topology: {script}\noptions: {value: 2, mode: b, n: 1}\n"
                                  "params: {probe: {count: 4, seed: 3}}\n", "two.yaml"))
    other = load_spec(counting.spec("topology: {script}\noptions: {value: 2, mode: a, n: 1}\n",
                                    "other.yaml"))
    assert one.points[0].model_options() != two.points[0].model_options()   # run as written
    assert key_of(one.points[0], sha, "inputs") == key_of(two.points[0], sha, "inputs")
    assert key_of(one.points[0], sha, "inputs") != key_of(other.points[0], sha, "inputs")


def test_script_digest_follows_packages_of_its_folder(tmp_path):
    """A helper package beside the topology (and its submodules, their ``__init__.py``, what
    they import from the folder, relatively or not) is part of the script's digest."""
    (tmp_path / "mylib" / "deep").mkdir(parents=True)
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "mylib" / "util.py").write_text("from . import helpers\nPOLICY = 'all'\n")
    (tmp_path / "mylib" / "helpers.py").write_text("from mylib.deep.leaf import X\n")
    (tmp_path / "mylib" / "deep" / "leaf.py").write_text("X = 1\n")   # namespace package
    (tmp_path / "mylib" / "unused.py").write_text("Z = 1\n")
    (tmp_path / "other.py").write_text("W = 1\n")
    imports = ["from mylib.util import POLICY", "import mylib.util as u", "import mylib.util",
               "from mylib import util"]
    for index, line in enumerate(imports):
        script = tmp_path / f"t{index}.py"
        script.write_text(f"import sst\n{line}\n")
        leaf = "from .deep.leaf import X\n" if index % 2 else "from mylib.deep.leaf import X\n"
        for path, text in (("mylib/util.py", "from . import helpers\nPOLICY = 'conv'\n"),
                           ("mylib/__init__.py", "Y = 1\n"), ("mylib/helpers.py", leaf),
                           ("mylib/deep/leaf.py", "X = 2\n")):
            before = script_digest(script)
            (tmp_path / path).write_text(text + f"# {index}\n")
            assert script_digest(script) != before, (line, path)
        before = script_digest(script)
        (tmp_path / "mylib" / "unused.py").write_text(f"Z = {index + 2}\n")  # not imported
        (tmp_path / "other.py").write_text(f"W = {index + 2}\n")
        assert script_digest(script) == before, line


def test_key_follows_the_content_of_files_params_name(counting):
    from sst_cdma.tools.sweep import load_spec
    from sst_cdma.tools.sweep.keys import key_of

    (counting.folder / "prof").mkdir()
    data = counting.folder / "prof" / "b.json"
    data.write_text("{}")
    path = counting.spec('topology: {script}\noptions: {n: 1}\n'
                         'params: {"probe": {seed: prof/b.json}}\n')
    sha = script_digest(counting.script)
    first = key_of(load_spec(path).points[0], sha, "inputs")
    assert key_of(load_spec(path).points[0], sha, "inputs") == first
    data.write_text('{"edited": true}')
    assert key_of(load_spec(path).points[0], sha, "inputs") != first
    # the same param naming no file keeps the key of an override without files
    plain = counting.spec('topology: {script}\noptions: {n: 1}\n'
                          'params: {"probe": {seed: prof/none.json}}\n', "plain.yaml")
    point = load_spec(plain).points[0]
    assert point.named_files() == {}
    assert key_of(point, sha, "inputs") == point_key(sha, ["--n", "1"],
                                                     {"probe": {"seed": "prof/none.json"}},
                                                     "inputs")
