"""Every malformed profile is rejected with a message naming the file and the field at fault."""
from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from sst_cdma.profiles import DensityProfile, ProfileError


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """Mutation that sets ``doc[path]`` (dotted, ints index lists)."""
    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _delete(path: str) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]
    return mutate


CASES = [
    # (mutation, expected message after "profile.json: ")
    (_set("tensors.conv3.points.2.density", 1.7),
     "tensors.conv3.points[2].density: 1.7 is not in [0, 1]"),
    (_set("tensors.conv1.points.0.density", -0.1),
     "tensors.conv1.points[0].density: -0.1 is not in [0, 1]"),
    (_set("tensors.conv1.points.1.progress", 1.5),
     "tensors.conv1.points[1].progress: 1.5 is not in [0, 1]"),
    (_set("tensors.conv3.points.1.progress", 0.0),
     "tensors.conv3.points[1].progress: 0.0 is not greater than the previous point's 0.0"),
    (_set("tensors.conv3.points.2.progress", 0.1),
     "tensors.conv3.points[2].progress: 0.1 is not greater than the previous point's 0.25"),
    (_set("format", "something-else"),
     'format: expected "sst-cdma-density-profile", got "something-else"'),
    (_set("version", 2), "version: 2 is not supported (this sst-cdma reads version 1)"),
    (_set("version", "1"), 'version: expected an integer, got string "1"'),
    (_set("version", True), "version: expected an integer, got boolean true"),
    (_delete("network"), 'missing field "network"'),
    (_set("network", ""), "network: must not be empty"),
    (_set("dtype", "int8"), 'dtype: "int8" is not one of float32'),
    (_set("extra", 1), '(top level): unknown field "extra"'),
    (_delete("tensors.conv1.points.1.density"),
     'tensors.conv1.points[1]: missing field "density"'),
    (_set("tensors.conv1.points.1.densty", 0.3),
     'tensors.conv1.points[1]: unknown field "densty"'),
    (_set("tensors.conv1.points.0.density", "0.5"),
     'tensors.conv1.points[0].density: expected a number, got string "0.5"'),
    (_set("tensors.conv1.points.0.density", None),
     "tensors.conv1.points[0].density: expected a number, got null"),
    (_set("tensors.conv1.points.0.ratios.zvc", -2), "tensors.conv1.points[0].ratios.zvc: -2 is "
     "not a positive number"),
    (_set("tensors.conv1.points.0.ratios.zvc", 0), "tensors.conv1.points[0].ratios.zvc: 0 is "
     "not a positive number"),
    # ZVC spends a mask bit per element and keeps every non-zero one whole: at density 0.5 in
    # float32 it reaches 32 / 17 = 1.882 at most, and never more than 32
    (_set("tensors.conv1.points.0.ratios.zvc", 10), "tensors.conv1.points[0].ratios.zvc: 10 "
     "exceeds 1.882, the most ZVC reaches on float32 at the point's density 0.5"),
    (_set("tensors.conv1.points.0.ratios_by_dtype", {"float16": {"zvc": 1000}}),
     "tensors.conv1.points[0].ratios_by_dtype.float16.zvc: 1000 exceeds 16, the most ZVC "
     "reaches on float16 (one mask bit per element)"),
    # the byte codecs' own ceilings, whatever the density (issue #24: 1e9 was accepted)
    (_set("tensors.conv1.points.0.ratios.zlib", 1e9), "tensors.conv1.points[0].ratios.zlib: "
     "1000000000.0 exceeds 1032, the most zlib can compress any float32 tensor"),
    (_set("tensors.conv1.points.0.ratios.lz4", 300), "tensors.conv1.points[0].ratios.lz4: 300 "
     "exceeds 255, the most lz4 can compress any float32 tensor"),
    (_set("tensors.conv1.points.0.ratios.zstd", 1e9), "ratios.zstd: 1000000000.0 exceeds 32768"),
    (_set("tensors.conv1.points.0.ratios.bplane_zstd", 40000), "ratios.bplane_zstd: 40000 "
     "exceeds 32768"),
    (_set("tensors.conv1.points.0.ratios.rle", 1e9), "ratios.rle: 1000000000.0 exceeds 65535, "
     "the most rle can compress any float32 tensor"),
    (_set("tensors.conv1.points.0.ratios_by_dtype", {"float16": {"rle": 40000}}),
     "ratios_by_dtype.float16.rle: 40000 exceeds 32767.5, the most rle can compress any "
     "float16 tensor"),
    (_set("tensors.conv1.points.0.ratios.brotli", 2.0),
     'tensors.conv1.points[0].ratios: unknown algorithm "brotli" (registered: zvc, rle, zlib, '
     'lz4, zstd, bplane_zstd)'),
    (_set("tensors.conv1.points", []), "tensors.conv1.points: is empty"),
    (_set("tensors.conv1.points", {"progress": 0}),
     "tensors.conv1.points: expected an array, got object"),
    (_set("tensors.conv1.sample_shape", [4, 0]),
     "tensors.conv1.sample_shape[1]: 0 is less than 1"),
    (_set("tensors.conv1.colour", "red"), 'tensors.conv1: unknown field "colour"'),
    (_delete("tensors.conv3.points"), 'tensors.conv3: missing field "points"'),
    (_set("tensors", {}), "tensors: is empty"),
    (_set("tensors", []), "tensors: expected an object, got array"),
    (_set("provenance.kind", "guessed"),
     'provenance.kind: expected "measured", "estimated" or "derived", got "guessed"'),
    (_delete("provenance.command"), 'provenance: missing field "command"'),
    (_set("provenance.source", "x"), 'provenance: unknown field "source"'),
    (_set("provenance.steps", -1), "provenance.steps: -1 is less than 0"),
    (_set("provenance.date", "yesterday"), 'provenance.date: "yesterday" is not an ISO 8601 date'),
    (_set("provenance", {"kind": "estimated"}), 'provenance: missing field "source"'),
]


@pytest.mark.parametrize("mutate, message", CASES, ids=[m for _, m in CASES])
def test_broken_file_names_the_field(document, write, mutate, message):
    mutate(document)
    path = write(document)
    with pytest.raises(ProfileError) as info:
        DensityProfile.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: "), text
    assert message in text, text


def test_nan_density_rejected(write):
    text = ('{"format": "sst-cdma-density-profile", "version": 1, "network": "n", '
            '"dtype": "float32", "provenance": {"kind": "estimated", "source": "s"}, '
            '"tensors": {"t": {"points": [{"progress": 0, "density": NaN}]}}}')
    with pytest.raises(ProfileError, match=re.escape("tensors.t.points[0].density: NaN is not a "
                                                     "finite number")):
        DensityProfile.load(write(text))


def test_dotted_tensor_names_are_quoted(document, write):
    document["tensors"]["layer1.0.relu"] = {"points": [{"progress": 0.0, "density": 2}]}
    with pytest.raises(ProfileError, match=re.escape('tensors["layer1.0.relu"].points[0].density:'
                                                     ' 2 is not in [0, 1]')):
        DensityProfile.load(write(document))


def test_not_json(write):
    path = write('{"format": ')
    with pytest.raises(ProfileError, match=rf"^{re.escape(str(path))}: not a profile: invalid JSON at "
                                           r"line 1"):
        DensityProfile.load(path)


def test_top_level_not_object(write):
    with pytest.raises(ProfileError, match=r"\(top level\): expected an object, got array"):
        DensityProfile.load(write([1, 2]))


def test_missing_file(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(ProfileError, match=rf"^{re.escape(str(path))}: cannot read"):
        DensityProfile.load(path)


def test_from_dict_names_its_source(document):
    document["tensors"]["conv1"]["points"][0]["density"] = 3
    with pytest.raises(ProfileError, match=r"^mine: tensors\.conv1\.points\[0\]\.density"):
        DensityProfile.from_dict(document, source="mine")


def test_profile_error_is_a_value_error():
    assert issubclass(ProfileError, ValueError)


def test_require_tensors_names_the_missing_one(document, write):
    path = write(document)
    profile = DensityProfile.load(path)
    profile.require_tensors(["conv1", "conv3"])
    with pytest.raises(ProfileError) as info:
        profile.require_tensors(["conv1", "conv2", "conv3"])
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    assert "has no tensor 'conv2'" in text and "network 'tiny'" in text
    with pytest.raises(ProfileError, match="has no tensors 'fc6', 'fc7'"):
        profile.require_tensors(["fc6", "conv1", "fc7"])


def test_unknown_tensor_query_is_clear(document):
    profile = DensityProfile.from_dict(document, source="p.json")
    with pytest.raises(ProfileError, match=r"p\.json: tensors\.fc9: no such tensor .*conv1, conv3"):
        profile.density("fc9", 0.5)
    with pytest.raises(ProfileError, match="unknown algorithm 'brotli'"):
        profile.ratio("conv1", "brotli", 0.5)
    with pytest.raises(ProfileError, match="progress must be a number"):
        profile.density("conv1", float("nan"))


def test_a_duplicate_key_is_refused_not_silently_the_last(write):
    """JSON parsers keep the last of two equal keys: a second density, or a second tensor of
    the same name, would replace the first without a word."""
    text = ('{"format": "sst-cdma-density-profile", "version": 1, "network": "n", '
            '"dtype": "float32", "provenance": {"kind": "estimated", "source": "s"}, '
            '"tensors": {"t": {"points": [{"progress": 0, "density": 0.9, "density": 0.3}]}}}')
    path = write(text)
    with pytest.raises(ProfileError, match=rf"^{re.escape(str(path))}: not a profile: "
                                           r"duplicate key 'density' in one object$"):
        DensityProfile.load(path)


def test_a_file_nested_too_deep_is_named(write):
    path = write("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ProfileError, match=rf"^{re.escape(str(path))}: not a profile: its JSON "
                                           r"is nested too deeply \(over 100 levels\)$"):
        DensityProfile.load(path)


@pytest.mark.parametrize("algorithm", ["rle", "zlib", "lz4", "zstd", "bplane_zstd"])
def test_each_byte_codecs_ceiling_is_above_what_it_reaches_on_zeros(algorithm):
    """The ceilings are upper bounds: the codec itself on 16 MiB of zeros (its best case) stays
    under them, and within a factor of 1.2 (so they still bind)."""
    import numpy as np

    from sst_cdma.codecs import compress
    from sst_cdma.profiles.schema import RATIO_CEILINGS

    zeros = np.zeros(1 << 22, np.float32)
    reached = zeros.nbytes / len(compress(zeros, algorithm))
    assert reached <= RATIO_CEILINGS[algorithm](4) < 1.2 * reached
