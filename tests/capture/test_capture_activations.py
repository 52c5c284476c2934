"""capture_activations on tiny models: densities and sizes match a direct computation."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from sst_cdma.tools.capture import CaptureError, build_profile, capture_activations  # noqa: E402
from sst_cdma.codecs import compressed_size  # noqa: E402
from sst_cdma.profiles import MeasuredProvenance, load_samples  # noqa: E402

ALGORITHMS = ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd")


class Tiny(nn.Module):
    """conv -> ReLU -> (1x1 conv -> in-place ReLU) -> fc -> ReLU6; then clobbers a hooked tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.block = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(inplace=True))
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(4 * 5 * 5, 6)
        self.out = nn.ReLU6()

    def forward(self, x):
        a = self.act(self.conv(x))
        b = self.block(a)
        y = self.out(self.fc(self.drop(torch.flatten(b, 1))))
        b.zero_()  # a later in-place write to the in-place ReLU's output
        return y

    def reference(self, x):
        """The three activations, computed directly (eval mode)."""
        a = torch.relu(self.conv(x))
        b = torch.relu(self.block[0](a))
        c = torch.clamp(self.fc(torch.flatten(b, 1)), 0, 6)
        return {"act": a, "block.1": b, "out": c}


def _model() -> Tiny:
    torch.manual_seed(3)
    return Tiny()


def _batches():
    g = torch.Generator().manual_seed(5)
    return [torch.randn(3, 2, 5, 5, generator=g) for _ in range(2)]


def test_density_and_sizes_match_direct_computation():
    model = _model()
    batches = _batches()
    result = capture_activations(model, batches)
    assert list(result.layers) == ["act", "block.1", "out"]
    assert result.batches == 2 and result.algorithms == ALGORITHMS
    with torch.no_grad():
        refs = [model.reference(x) for x in batches]
    for name, layer in result.layers.items():
        arrays = [r[name].numpy() for r in refs]
        nnz = sum(int(np.count_nonzero(a.view(np.uint32))) for a in arrays)
        count = sum(a.size for a in arrays)
        assert layer.elements == count
        assert layer.nonzeros == nnz
        assert layer.density == pytest.approx(nnz / count)
        assert 0.0 < layer.density < 1.0
        assert layer.raw_bytes == 4 * count
        assert layer.sample_shape == arrays[0].shape[1:]
        for algorithm in ALGORITHMS:
            expected = sum(compressed_size(a, algorithm) for a in arrays)
            assert layer.compressed_bytes[algorithm] == expected
            assert layer.ratio(algorithm) == pytest.approx(4 * count / expected)
    assert result.layers["block.1"].module_type == "ReLU"
    assert result.layers["out"].module_type == "ReLU6"


def test_inplace_relu_captured_before_later_writes():
    model = _model()
    x = _batches()[0]
    result = capture_activations(model, x, algorithms=("zvc",))
    with torch.no_grad():
        ref = model.reference(x)["block.1"].numpy()
    assert result.layers["block.1"].nonzeros == int(np.count_nonzero(ref)) > 0


def test_eval_mode_no_grad_and_flags_restored():
    model = _model()
    model.train()
    model.block.eval()  # a mixed state must come back exactly
    seen = {}
    model.drop.register_forward_hook(
        lambda m, i, o: seen.update(training=m.training, grad=torch.is_grad_enabled()))
    capture_activations(model, _batches()[0], algorithms=())
    assert seen == {"training": False, "grad": False}
    assert model.training and model.drop.training and not model.block.training
    assert not model.block[1]._forward_hooks  # hooks removed


def test_repeated_module_calls_get_numbered_names():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.lin(self.relu(x)))

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    batches = [x.clone(), x.numpy().astype(np.float64)]  # the in-place ReLU writes its input
    result = capture_activations(Twice(), batches, algorithms=("zvc",))
    assert list(result.layers) == ["relu#0", "relu#1"]
    first = result.layers["relu#0"]
    assert first.nonzeros == 2 * int((x > 0).sum()) and first.batches == 2


def test_names_select_and_rename():
    model = _model()
    result = capture_activations(model, _batches(), names={"block.1": "conv2", "conv": "conv1_out"},
                                 algorithms=("zlib",))
    assert list(result.layers) == ["conv1_out", "conv2"]
    assert result.layers["conv1_out"].density > 0.99  # a conv output before its ReLU is dense
    assert result.layers["conv1_out"].module_type == "Conv2d"
    with pytest.raises(CaptureError, match="has no module 'nope'.*act, block.1, out"):
        capture_activations(model, _batches(), names=["nope"])
    with pytest.raises(CaptureError, match="'act' and 'out' are both named 'x'"):
        capture_activations(model, _batches(), names={"act": "x", "out": "x"})


def test_errors_are_clear():
    class NoRelu(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    with pytest.raises(CaptureError, match="no ReLU, ReLU6 modules to hook.*F.relu"):
        capture_activations(NoRelu(), torch.zeros(1))
    with pytest.raises(CaptureError, match="unknown algorithm 'brotli'"):
        capture_activations(_model(), _batches(), algorithms=("brotli",))
    with pytest.raises(CaptureError, match="no batches"):
        capture_activations(_model(), [])
    with pytest.raises(CaptureError, match=r"inputs\[0\]: expected a tensor or numpy array"):
        capture_activations(_model(), ["x"])


def test_samples_hold_the_first_batch(tmp_path):
    model = _model()
    batches = _batches()
    result = capture_activations(model, batches, algorithms=(), sample_dir=tmp_path / "s")
    assert result.samples_index == tmp_path / "s" / "index.json"
    samples = load_samples(tmp_path / "s")
    with torch.no_grad():
        ref = model.reference(batches[0])
    assert list(samples) == ["act", "block.1", "out"]
    for name, array in samples.items():
        assert array.tobytes() == ref[name].numpy().tobytes()


def test_build_profile_from_two_captures():
    model = _model()
    early = capture_activations(model, _batches())
    with torch.no_grad():
        model.conv.bias.fill_(-10.0)  # kills most of act and changes what follows
    late = capture_activations(model, _batches())
    prov = MeasuredProvenance(model="Tiny", data="randn", steps=None, command="test",
                              date="2024-01-01")
    profile = build_profile("tiny", [(1.0, late), (0.0, early)], prov)
    assert list(profile.tensors) == ["act", "block.1", "out"]
    assert profile.density("act", 0.0) == pytest.approx(early.layers["act"].density, abs=1e-6)
    assert profile.density("act", 1.0) == pytest.approx(late.layers["act"].density, abs=1e-6)
    assert profile.density("act", 1.0) < profile.density("act", 0.0)
    assert profile.ratio("act", "zvc", 0.0) == pytest.approx(early.layers["act"].ratio("zvc"),
                                                             rel=1e-4)
    assert profile.tensors["act"].sample_shape == (4, 5, 5)
    assert profile.dtype == "float32"


def test_bfloat16_model_is_measured_on_raw_words():
    model = _model().to(torch.bfloat16)
    x = _batches()[0].to(torch.bfloat16)
    result = capture_activations(model, x, algorithms=ALGORITHMS)
    layer = result.layers["act"]
    assert layer.dtype == "bfloat16" and result.dtype == "bfloat16"
    with torch.no_grad():
        words = torch.relu(model.conv(x)).view(torch.int16).numpy().view(np.uint16)
    assert layer.raw_bytes == 2 * words.size
    assert layer.nonzeros == int(np.count_nonzero(words))
    for algorithm in ALGORITHMS:
        assert layer.compressed_bytes[algorithm] == compressed_size(
            words, algorithm, element_type="bfloat16")


def test_float32_inputs_are_cast_to_a_half_precision_model():
    """Synthetic --input-shape batches are float32 torch tensors: a bfloat16 model takes
    them in its own element type, as it takes numpy inputs."""
    model = _model().to(torch.bfloat16)
    x = _batches()[0]
    assert x.dtype == torch.float32
    cast = capture_activations(model, x, algorithms=ALGORITHMS)
    same = capture_activations(model, x.to(torch.bfloat16), algorithms=ALGORITHMS)
    assert cast.layers["act"].dtype == "bfloat16"
    assert cast.layers["act"].compressed_bytes == same.layers["act"].compressed_bytes


def test_bfloat16_samples_record_their_element_type(tmp_path):
    from sst_cdma.profiles import load_sample_set

    model = _model().to(torch.bfloat16)
    x = _batches()[0].to(torch.bfloat16)
    capture_activations(model, x, sample_dir=tmp_path / "s", network="tiny")
    samples = load_sample_set(tmp_path / "s")
    assert samples.network == "tiny"
    sample = samples.samples["act"]
    assert sample.array.dtype == np.uint16 and sample.element_type == "bfloat16"
