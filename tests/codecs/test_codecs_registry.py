"""The codec registry: the one list of algorithms, and a test-only codec that, once registered,
is used everywhere the list is (options, the engine, the model, profiles, the reporter, sweeps,
the benchmark) without touching any other file."""
from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pytest
from codec_helpers import bit_arrays, reseal, same_bits
from hypothesis import given, settings

import sst_cdma
from sst_cdma import codecs
from sst_cdma.codecs import CodecError, registry
from sst_cdma.codecs.codec import Payload

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "topologies" / "pascal_cdma.py"
TOY_ID = 200


class ToyCodec:
    """Zero elision with a flag byte per element: ``count`` bytes of 0/1 flags, then the
    non-zero elements (little-endian, full width). Payload ``n + itemsize * nnz`` bytes."""

    name = "toy"

    def payload_size(self, bits: np.ndarray) -> int:
        return bits.size + bits.itemsize * int(np.count_nonzero(bits))

    def prepare(self, bits: np.ndarray) -> Payload:
        flags = (bits != 0).astype(np.uint8)
        data = flags.tobytes() + bits[bits != 0].tobytes()

        def write(out: np.ndarray) -> None:
            out[:] = np.frombuffer(data, np.uint8)

        return Payload(len(data), write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        if not count <= payload_len <= count * (1 + itemsize) or \
                (payload_len - count) % itemsize:
            raise CodecError(f"toy payload of {payload_len} bytes cannot hold {count} elements")

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        flags = payload[:count]
        if np.any(flags > 1):
            raise CodecError("corrupt toy payload: a flag is neither 0 nor 1")
        nnz = int(flags.sum())
        itemsize = np.dtype(bits_dtype).itemsize
        if count + nnz * itemsize != payload.size:
            raise CodecError("corrupt toy payload: flags and length disagree")
        out = np.zeros(count, bits_dtype)
        out[flags.astype(bool)] = np.frombuffer(payload[count:].tobytes(), bits_dtype)
        return out


def toy_ratio(density: float, itemsize: int) -> float:
    """The toy codec's ratio of a large array: ``itemsize / (1 + itemsize * density)``."""
    return itemsize / (1 + itemsize * density)


@pytest.fixture
def toy():
    """The toy codec, registered with a ratio formula for the duration of a test."""
    with registry.registered("toy", TOY_ID, ToyCodec(), ratio_formula=toy_ratio) as spec:
        yield spec
    assert "toy" not in registry.algorithm_names()


@pytest.fixture
def sampled_toy():
    """The toy codec without a formula: its ratio from density is sampled."""
    with registry.registered("toy", TOY_ID, ToyCodec()) as spec:
        yield spec


def run(*opts: str):
    return sst_cdma.run(TOPOLOGY, ["--no-baselines", *opts], console=io.StringIO())


# -- the registry itself -------------------------------------------------------------------------

def test_the_builtin_codecs_in_the_order_users_see_with_their_stream_ids():
    assert registry.algorithm_names() == ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd")
    assert registry.algorithm_choices() == ("none", "zvc", "rle", "zlib", "lz4", "zstd",
                                            "bplane_zstd")
    assert [s.format_id for s in registry.specs()] == [1, 2, 3, 4, 5, 6]
    assert codecs.ALGORITHMS == ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd")
    assert registry.get("zvc").ratio_formula is codecs.zvc_ratio
    assert [s.sampled for s in registry.specs()] == [False, True, True, True, True, True]


def test_existing_streams_keep_their_algorithm_byte():
    x = np.array([0.0, 1.0, 0.0, 2.0], np.float32)
    for name, byte in (("zvc", 1), ("rle", 2), ("zlib", 3), ("lz4", 4), ("zstd", 5),
                       ("bplane_zstd", 6)):
        blob = codecs.compress(x, name)
        assert blob[5] == byte
        assert codecs.stream_info(blob).algorithm == name


@pytest.mark.parametrize("name, format_id, message", [
    ("zvc", 201, "codec 'zvc' is already registered (format id 1)"),
    ("fresh", 3, "codec 'fresh': format id 3 is already registered to 'zlib'"),
    ("none", 201, "codec name 'none': expected a lower-case identifier"),
    ("LZ4", 201, "codec name 'LZ4': expected a lower-case identifier"),
    ("", 201, "codec name '': expected"),
    ("fresh", 0, "format id 0 is not an integer in 1..255"),
    ("fresh", 256, "format id 256 is not an integer in 1..255"),
    ("fresh", True, "format id True is not an integer in 1..255"),
])
def test_bad_or_duplicate_registrations_are_errors(name, format_id, message):
    with pytest.raises(ValueError) as info:
        registry.register(name, format_id, ToyCodec())
    assert message in str(info.value)
    assert registry.algorithm_names() == ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd")


def test_an_unknown_algorithm_is_one_line_listing_the_registered_ones():
    from sst_cdma.model.compression import ratio_from_density

    listed = "(registered: zvc, rle, zlib, lz4, zstd, bplane_zstd)"
    with pytest.raises(ValueError) as info:
        registry.get("brotli")
    assert str(info.value) == f"unknown algorithm 'brotli' {listed}"
    with pytest.raises(ValueError) as info:
        codecs.compress(np.zeros(3, np.float32), "brotli")
    assert str(info.value) == f"unknown algorithm 'brotli' {listed}"
    with pytest.raises(ValueError, match="unknown algorithm 'brotli'.*zvc, rle, zlib, lz4, zstd, "
                                         "bplane_zstd"):
        ratio_from_density("brotli", 0.5)
    assert registry.unknown_algorithm("x", "--algorithm", allow_none=True) == (
        "--algorithm: unknown algorithm 'x' (registered: none, zvc, rle, zlib, lz4, zstd, "
        "bplane_zstd)")


def test_a_stream_of_an_unregistered_format_id_is_refused_listing_the_ids():
    blob = bytearray(codecs.compress(np.ones(5, np.float32), "zvc"))
    blob[5] = 9
    with pytest.raises(CodecError) as info:
        codecs.decompress(reseal(blob))
    assert str(info.value) == ("unknown algorithm id 9 in the stream header "
                               "(registered: zvc = 1, rle = 2, zlib = 3, lz4 = 4, zstd = 5, "
                               "bplane_zstd = 6)")


def test_registration_order_is_kept_and_unregistering_restores_the_list(toy):
    with registry.registered("another", 201, ToyCodec()):
        assert registry.algorithm_names() == ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd",
                                              "toy", "another")
    assert registry.algorithm_names() == ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd", "toy")
    assert registry.by_format_id(TOY_ID) is toy


def test_a_codec_can_be_registered_by_module_path_and_loads_on_first_use():
    with registry.registered("lazy", 201, "sst_cdma.codecs.deflate:ZLIB") as spec:
        assert spec.codec is codecs.deflate.ZLIB
        x = np.arange(10, dtype=np.int16)
        assert same_bits(codecs.decompress(codecs.compress(x, "lazy")), x)


# -- a newly registered codec must pass what the built-in ones pass ------------------------------

@settings(max_examples=60, deadline=None)
@given(x=bit_arrays())
def test_toy_round_trip_is_bit_exact_and_sized_exactly(x):
    with registry.registered("toy", TOY_ID, ToyCodec()):
        blob = codecs.compress(x, "toy")
        assert len(blob) == codecs.compressed_size(x, "toy")
        assert blob[5] == TOY_ID
        assert same_bits(codecs.decompress(blob), x)


def test_toy_corruption_is_a_codec_error(toy):
    x = np.array([0, 3, 0, 0, 7], np.int32)
    blob = codecs.compress(x, "toy")
    for i in range(len(blob) * 8):
        bad = bytearray(blob)
        bad[i // 8] ^= 1 << (i % 8)
        with pytest.raises(CodecError):
            codecs.decompress(bytes(bad))
    flags_at = len(blob) - 5 - 2 * 4
    bad = bytearray(blob)
    bad[flags_at] = 2   # CRC resealed: the codec's own validation must catch it
    with pytest.raises(CodecError, match="neither 0 nor 1"):
        codecs.decompress(reseal(bytes(bad)))
    with pytest.raises(CodecError, match="truncated"):
        codecs.decompress(blob[:-1])


def test_a_stream_of_an_unregistered_codec_no_longer_decodes():
    with registry.registered("toy", TOY_ID, ToyCodec()):
        blob = codecs.compress(np.ones(4, np.float32), "toy")
    with pytest.raises(CodecError, match=f"unknown algorithm id {TOY_ID} "):
        codecs.decompress(blob)


def test_the_codec_benchmark_times_a_registered_codec(toy, capsys):
    spec = importlib.util.spec_from_file_location("bench_codecs",
                                                  REPO / "benchmarks" / "bench_codecs.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--mib", "1", "--repeats", "1", "--min-speedup", "0",
                       "--algorithms", "toy"]) == 0
    out = capsys.readouterr().out
    assert "sst_cdma toy" in out and "sst_cdma rle" not in out
    with pytest.raises(SystemExit):
        bench.main(["--mib", "1", "--algorithms", "brotli"])
    assert "--algorithms: unknown algorithm 'brotli' (registered: zvc, rle, zlib, lz4, zstd, " \
        "bplane_zstd, toy)" in \
        capsys.readouterr().err


# -- everything else derives its list from the registry ------------------------------------------

def test_options_and_the_engines_codec_slot_accept_exactly_the_registered_algorithms(toy):
    from components.cdma_engine import CDMAEngine
    from components.codecs import element_type
    from sst_cdma.engine.config import ConfigError
    from sst_cdma.engine.library import find_element, slot_fillers
    from sst_cdma.builder.topology import option_parser

    parser = option_parser("test")
    assert parser.parse_args(["--algorithm", "toy"]).algorithm == "toy"
    with pytest.raises(ConfigError) as info:
        parser.parse_args(["--algorithm", "brotli"])
    assert str(info.value) == ("model option error: argument --algorithm: 'brotli' is not one of "
                               "none, zvc, rle, zlib, lz4, zstd, bplane_zstd, toy")
    # the engine's codec slot takes the toy codec's element, which registering made
    slot = next(s for s in CDMAEngine.SLOTS if s.name == "codec")
    assert slot_fillers(slot) == ["cdma.BplaneZstd", "cdma.LZ4", "cdma.RLE", "cdma.TOY", "cdma.ZVC",
                              "cdma.Zlib", "cdma.Zstd"]
    assert find_element(element_type("toy")).ALGORITHM == "toy"
    with pytest.raises(ValueError, match="unknown algorithm 'brotli' .registered: zvc, rle, "
                                         "zlib, lz4, zstd, bplane_zstd, toy"):
        element_type("brotli")


def test_the_model_uses_the_codecs_formula_or_samples_the_real_codec(toy):
    from sst_cdma.model.compression import ratio_from_density

    assert ratio_from_density("toy", 0.25) == toy_ratio(0.25, 4)
    assert ratio_from_density("toy", 0.25, "float16") == toy_ratio(0.25, 2)
    with pytest.raises(ValueError, match="not in"):
        ratio_from_density("toy", 1.5)


def test_a_codec_without_a_formula_is_sampled_live(sampled_toy):
    from sst_cdma.codecs import sampling
    from sst_cdma.model.compression import ratio_from_density, sampled_algorithms

    assert sampled_algorithms() == ("rle", "zlib", "lz4", "zstd", "bplane_zstd", "toy")
    ratio = ratio_from_density("toy", 0.25)
    assert ratio == sampling.sample_ratio("toy", 50, "float32")
    # 32768 float32 elements, about a quarter non-zero, a 40-byte header
    assert ratio == pytest.approx(toy_ratio(0.25, 4), rel=0.02)
    assert ratio != toy_ratio(0.25, 4)


def test_a_simulation_runs_with_the_new_codec_and_reports_its_ratio(toy, tmp_path):
    from sst_cdma.profiles import load_profile

    result = run("--network", "alexnet", "--batch", "8", "--algorithm", "toy", "--progress",
                 "1.0")
    engine = result.simulation.components["gpu0.dma"]
    profile = load_profile("alexnet")
    sparse = [t for t, d in engine.plan.densities.items() if d < 1.0]
    assert sparse
    for tensor in sparse:
        # the shipped profile carries no toy ratio: it is estimated from the density
        assert profile.ratio(tensor, "toy", 1.0) is None
        assert engine.plan.ratios[tensor]["toy"] == toy_ratio(engine.plan.densities[tensor], 4)
    report = result.reports["summary"]
    by_algorithm = report["compression_ratio_by_algorithm"]
    assert list(by_algorithm) == ["zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd", "toy"]
    assert by_algorithm["toy"] == pytest.approx(report["compression_ratio"], rel=1e-9)
    assert by_algorithm["toy"] > 1.0


def test_functional_mode_moves_real_toy_streams(toy, tmp_path):
    from workloads import parse_stream, render_stream

    stream = parse_stream(render_stream("alexnet", 1, "float32", "conv"), "s")
    rng = np.random.default_rng(5)
    arrays = {}
    for op in stream.ops:
        if op.op == "offload":
            shape = stream.tensors[op.name].shape
            x = np.abs(rng.standard_normal(shape)).astype(np.float32)
            x[rng.random(shape) < 0.6] = 0.0
            arrays[op.name] = x
    path = tmp_path / "tensors.npz"
    np.savez(path, **arrays)
    result = run("--network", "alexnet", "--batch", "1", "--algorithm", "toy", "--tensors",
                 str(path), "--functional")
    engine = result.simulation.components["gpu0.dma"]
    for name, x in arrays.items():
        assert engine.wire[name] == len(codecs.compress(x, "toy"))
    assert not result.simulation.components["host"].payloads   # every prefetch checked


def test_profiles_accept_ratios_of_registered_codecs_only(tmp_path):
    from sst_cdma.profiles import DensityProfile, ProfileError, load_profile

    data = load_profile("digits_cnn").to_dict()
    first = data["tensors"]["conv1"]["points"][0]
    first["ratios"]["toy"] = 1.5
    path = tmp_path / "with_toy.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError) as info:
        DensityProfile.load(path)
    assert str(info.value) == (f'{path}: tensors.conv1.points[0].ratios: unknown algorithm '
                               f'"toy" (registered: zvc, rle, zlib, lz4, zstd, bplane_zstd)')
    with registry.registered("toy", TOY_ID, ToyCodec(), ratio_formula=toy_ratio):
        profile = DensityProfile.load(path)
        assert profile.ratio("conv1", "toy", 0.0) == 1.5
        assert list(profile.to_dict()["tensors"]["conv1"]["points"][0]["ratios"]) == \
            ["zvc", "rle", "zlib", "toy"]
    with pytest.raises(ProfileError, match="unknown algorithm 'toy' .registered: zvc, rle, "
                                           "zlib, lz4, zstd, bplane_zstd.$"):
        load_profile("digits_cnn").ratio("conv1", "toy", 0.0)


@pytest.mark.slow  # loads every shipped profile twice (13 s)
def test_shipped_profiles_load_unchanged_with_a_new_codec_registered(toy):
    from sst_cdma.profiles import load_profile, shipped_profile_path, shipped_profiles

    for name in shipped_profiles():
        text = shipped_profile_path(name).read_text(encoding="utf-8")
        assert load_profile(name).to_json() == text, name


def test_a_sweep_spec_naming_an_unknown_algorithm_is_refused_up_front(toy, tmp_path):
    from sst_cdma.tools.sweep import SpecError, load_spec
    from sst_cdma.tools.sweep.validate import validate_points

    path = tmp_path / "sweep.yaml"
    path.write_text(f"topology: {TOPOLOGY}\noptions: {{network: alexnet, batch: 8}}\n"
                    "grid:\n  algorithm: [toy, brotli]\n")
    spec = load_spec(path)
    with pytest.raises(SpecError) as info:
        validate_points(str(spec.path), spec.points)
    message = str(info.value)
    assert "\n" not in message and "point 1 " in message
    assert ("argument --algorithm: 'brotli' is not one of none, zvc, rle, zlib, lz4, zstd, "
            "bplane_zstd, toy") in message


def test_capture_measures_every_registered_codec_by_default(toy):
    pytest.importorskip("torch")  # the capture extra; a '.[test]' install has no torch
    from sst_cdma.tools.capture.cli import build_parser
    from sst_cdma.tools.capture.digits_train import format_profile
    from sst_cdma.profiles import load_profile

    assert build_parser().parse_args(["--model", "m:f", "--input-shape", "1"]).algorithms == \
        "zvc,rle,zlib,lz4,zstd,bplane_zstd,toy"
    header = format_profile(load_profile("digits_cnn")).splitlines()[0]
    assert header.split()[-14:] == ["zvc", "x", "rle", "x", "zlib", "x", "lz4", "x", "zstd", "x",
                                    "bplane_zstd", "x", "toy", "x"]

