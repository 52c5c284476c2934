"""Network definitions: loading, macro expansion, shape inference, costs, and clear errors."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from workloads import (CNNS, WorkloadError, itemsize, load_network)
from workloads.macros import MAX_DEPTH


def shapes(name: str, batch: int = 1) -> dict[str, tuple[int, ...]]:
    return {i.name: i.shape[1:] for i in load_network(name).infer(batch)}


def params(name: str) -> int:
    return load_network(name).param_count()


@pytest.mark.parametrize("name", CNNS)  # transformers end in a vocabulary-wide cross-entropy
def test_every_network_loads_and_ends_in_a_1000_way_loss(name):
    net = load_network(name)
    infos = net.infer(2)
    assert infos[0].kind == "data"
    assert infos[-1].kind == "loss" and infos[-1].shape == (2, 1000)
    assert all(min(i.shape) > 0 and i.bytes > 0 for i in infos)
    assert net.name == name


def test_alexnet_shapes_and_counts():
    s = shapes("alexnet")
    assert s["conv1"] == (96, 55, 55)
    assert s["pool1"] == (96, 27, 27)
    assert s["conv2"] == (256, 27, 27)
    assert s["pool2"] == (256, 13, 13)
    assert s["conv5"] == (256, 13, 13)
    assert s["pool5"] == (256, 6, 6)
    assert s["fc6"] == (4096,)
    assert params("alexnet") == 60_965_224          # BVLC AlexNet, grouped convs
    assert load_network("alexnet").macs() == pytest.approx(0.724e9, rel=0.005)


def test_vgg16_shapes_and_counts():
    s = shapes("vgg16")
    assert s["conv1_1"] == (64, 224, 224)
    assert s["pool1"] == (64, 112, 112)
    assert s["conv4_3"] == (512, 28, 28)
    assert s["pool5"] == (512, 7, 7)
    assert params("vgg16") == 138_357_544
    assert load_network("vgg16").macs() == pytest.approx(15.47e9, rel=0.005)


def test_resnet50_shapes_and_counts():
    s = shapes("resnet50")
    assert s["conv1"] == (64, 112, 112)
    assert s["pool1"] == (64, 56, 56)
    assert s["res2c/add"] == (256, 56, 56)
    assert s["res3a/add"] == (512, 28, 28)
    assert s["res4f/add"] == (1024, 14, 14)
    assert s["res5c/add"] == (2048, 7, 7)
    assert s["pool5"] == (2048, 1, 1)
    assert params("resnet50") == 25_557_032         # torchvision resnet50
    assert load_network("resnet50").macs() == pytest.approx(4.09e9, rel=0.01)


def test_googlenet_shapes_and_counts():
    s = shapes("googlenet")
    assert s["conv1/7x7_s2"] == (64, 112, 112)
    assert s["pool1/3x3_s2"] == (64, 56, 56)        # Caffe ceil-mode pooling
    assert s["pool2/3x3_s2"] == (192, 28, 28)
    assert s["inception_3a/output"] == (256, 28, 28)
    assert s["inception_3b/output"] == (480, 28, 28)
    assert s["inception_4a/output"] == (512, 14, 14)
    assert s["inception_4e/output"] == (832, 14, 14)
    assert s["inception_5b/output"] == (1024, 7, 7)
    # bvlc_googlenet without the auxiliary classifiers: 7.0M (the paper quotes ~6.8M)
    assert params("googlenet") == 6_998_552
    assert load_network("googlenet").macs() == pytest.approx(1.58e9, rel=0.01)


def test_squeezenet_v10_shapes_and_counts():
    s = shapes("squeezenet")
    assert s["conv1"] == (96, 111, 111)
    assert s["pool1"] == (96, 55, 55)
    assert s["fire2/squeeze1x1"] == (16, 55, 55)
    assert s["fire2/concat"] == (128, 55, 55)
    assert s["fire4/concat"] == (256, 55, 55)
    assert s["pool8"] == (512, 13, 13)
    assert s["conv10"] == (1000, 13, 13)
    assert s["pool10"] == (1000, 1, 1)
    assert params("squeezenet") == 1_248_424
    assert 0.8e9 < load_network("squeezenet").macs() < 0.87e9


def test_nin_and_overfeat_shapes_and_counts():
    s = shapes("nin")
    assert s["conv1"] == (96, 54, 54)
    assert s["pool0"] == (96, 27, 27)
    assert s["pool2"] == (256, 13, 13)
    assert s["pool3"] == (384, 6, 6)
    assert s["pool4"] == (1000, 1, 1)
    assert params("nin") == 7_595_176
    o = shapes("overfeat")
    assert o["conv1"] == (96, 56, 56)
    assert o["pool1"] == (96, 28, 28)
    assert o["conv2"] == (256, 24, 24)
    assert o["pool2"] == (256, 12, 12)
    assert o["pool5"] == (1024, 6, 6)
    assert params("overfeat") == 145_920_872


def test_flops_conventions():
    infos = {i.name: i for i in load_network("vgg16").infer(4)}
    conv = infos["conv2_1"]
    # 2 FLOPs per multiply-add, no bias adds
    assert conv.flops_fwd == 2 * 4 * 128 * 112 * 112 * 64 * 9
    assert conv.flops_bwd == 2 * conv.flops_fwd      # data grad + weight grad
    first = infos["conv1_1"]
    assert first.flops_bwd == first.flops_fwd         # the image needs no gradient
    assert first.grad_inputs == ()
    fc = infos["fc7"]
    assert fc.flops_fwd == 2 * 4 * 4096 * 4096
    assert fc.params == 4096 * 4096 + 4096
    assert fc.weight_bytes == fc.params * 4
    total_fwd = sum(i.flops_fwd for i in infos.values())
    assert total_fwd / 4 / 2 == pytest.approx(15.5e9, rel=0.01)


def test_dram_traffic_estimate():
    infos = {i.name: i for i in load_network("alexnet").infer(8)}
    c2 = infos["conv2"]
    in_bytes = infos["pool1"].bytes
    assert c2.dram_fwd == in_bytes + c2.weight_bytes + c2.bytes
    # backward: read dY, X, W; write dX, dW
    assert c2.dram_bwd == c2.bytes + in_bytes + c2.weight_bytes + in_bytes + c2.weight_bytes
    relu = infos["relu2"]
    assert relu.dram_fwd == 2 * relu.bytes and relu.dram_bwd == 3 * relu.bytes


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dtypes_scale_bytes(dtype):
    info = load_network("alexnet").infer(3, dtype)[1]
    assert info.bytes == 3 * 96 * 55 * 55 * itemsize(dtype)
    assert info.weight_bytes == info.params * itemsize(dtype)


def test_tensor_naming_in_place_and_sparsity():
    net = load_network("alexnet")
    infos = {i.name: i for i in net.infer(1)}
    assert infos["relu1"].output == "conv1" and infos["relu1"].in_place
    assert infos["norm1"].inputs == ("conv1",)
    assert infos["drop6"].output == "fc6"
    tensors = net.tensors(1)
    assert "relu1" not in tensors and "drop6" not in tensors
    assert tensors["conv1"].sparse                  # post-ReLU
    assert tensors["pool1"].sparse                  # max-pool of post-ReLU data keeps zeros
    assert not tensors["fc8"].sparse and not tensors["data"].sparse
    assert tensors["conv1"].modifiers == ("relu1",)
    assert tensors["conv1"].consumers == ("norm1",)
    assert not tensors["data"].needs_grad
    r = load_network("resnet50").tensors(1)
    assert not r["res2a/bn_branch2c"].sparse        # batchnorm output: no ReLU
    assert r["res2a/add"].sparse                     # relu in place on the add
    assert set(r["res2a/add"].consumers) == {"res2b/branch2a", "res2b/add"}
    g = load_network("googlenet").tensors(1)
    assert g["inception_3a/output"].sparse           # concat of post-ReLU branches
    assert len(g["pool2/3x3_s2"].consumers) == 4


def test_macro_naming_follows_caffe():
    names = [layer.name for layer in load_network("squeezenet").layers]
    assert names[4:11] == ["fire2/squeeze1x1", "fire2/relu_squeeze1x1", "fire2/expand1x1",
                           "fire2/relu_expand1x1", "fire2/expand3x3", "fire2/relu_expand3x3",
                           "fire2/concat"]
    net = load_network("googlenet")
    assert net.layer("inception_3b/1x1").inputs == ("inception_3a/output",)
    assert net.layer("inception_3a/pool").input_tensors == ("pool2/3x3_s2",)
    assert net.layer("inception_3a/1x1").macro == "inception_3a"


# --- user files and errors -------------------------------------------------------------------

def write(tmp_path: Path, body: str, name: str = "net.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


TINY = """\
name: tiny
layers:
  - {name: data, kind: data, params: {shape: [3, 16, 16]}}
  - {name: conv1, kind: conv, params: {num_output: 8, kernel_size: 3, pad: 1}}
  - {name: relu1, kind: relu}
%s
  - {name: fc, kind: fc, params: {num_output: 10}}
  - {name: loss, kind: loss}
"""


def test_user_network_with_own_nested_macro(tmp_path):
    path = write(tmp_path, """\
        name: custom
        macros:
          convrelu:
            args: {n: null, k: 3}
            layers:
              - {name: conv, kind: conv, params: {num_output: $n, kernel_size: $k, pad: 1}}
              - {name: relu, kind: relu}
          merge:
            layers:
              - {name: sum, kind: add, inputs: [$input]}
              - {name: relu, kind: relu}
          pair:
            args: [n]
            output: cat
            layers:
              - {name: a, kind: convrelu, inputs: [$input], params: {n: $n}}
              - {name: b, kind: convrelu, inputs: [$input], params: {n: $n}}
              - {name: cat, kind: concat, inputs: [a, b]}
        layers:
          - {name: data, kind: data, params: {shape: [3, 8, 8]}}
          - {name: p1, kind: pair, params: {n: 4}}
          - {name: p2, kind: pair, params: {n: 2}}
          - {name: sum, kind: merge, inputs: [p2/a, p2/b]}
          - {name: lrn, kind: lrn, inputs: [p1], params: {alpha: 1e-4}}
          - {name: loss, kind: loss}
        """)
    net = load_network(path)
    s = {i.name: i.shape for i in net.infer(2)}
    assert s["p1/a/conv"] == (2, 4, 8, 8)
    assert s["p1/cat"] == (2, 8, 8, 8)
    assert s["p2/a/conv"] == (2, 2, 8, 8)
    assert net.layer("p2/a/conv").inputs == ("p1/cat",)
    assert net.layer("sum/sum").input_tensors == ("p2/a/conv", "p2/b/conv")
    assert net.tensors(1)["sum/sum"].sparse
    assert net.layer("lrn").params["alpha"] == pytest.approx(1e-4)


@pytest.mark.parametrize("snippet, layer, fragment", [
    ("  - {name: bad, kind: convolution}", "bad", "unknown kind 'convolution'"),
    ("  - {name: bad, kind: pool, inputs: [nope], params: {kernel_size: 2}}", "bad",
     "unknown input 'nope'"),
    ("  - {name: bad, kind: conv, params: {num_output: 4, kernel_size: 17}}", "bad",
     "non-positive"),
    ("  - {name: bad, kind: pool, params: {kernel_size: 2, stride: 40, pad: 0}}\n"
     "  - {name: bad2, kind: conv, params: {num_output: 2, kernel_size: 3}}", "bad2",
     "non-positive"),
    ("  - {name: bad, kind: conv, params: {num_output: four, kernel_size: 3}}", "bad",
     "num_output"),
    ("  - {name: bad, kind: conv, params: {num_output: 4, kernel_size: 3, stride: 0}}", "bad",
     "stride"),
    ("  - {name: bad, kind: conv, params: {num_output: 4}}", "bad", "missing required param"),
    ("  - {name: bad, kind: conv, params: {num_output: 4, kernel_size: 3, padd: 1}}", "bad",
     "unknown param"),
    ("  - {name: bad, kind: conv, params: {num_output: 5, kernel_size: 3, group: 2}}", "bad",
     "group"),
    ("  - {name: bad, kind: pool, params: {kernel_size: 2, pad: 2}}", "bad", "pad"),
    ("  - {name: bad, kind: dropout, params: {ratio: 1.5}}", "bad", "ratio"),
    ("  - {name: bad, kind: lrn, params: {local_size: 4}}", "bad", "odd"),
    ("  - {name: p, kind: pool, params: {kernel_size: 2, stride: 2}}\n"
     "  - {name: bad, kind: concat, inputs: [conv1, p]}", "bad", "differ in H x W"),
    ("  - {name: bad, kind: add, inputs: [conv1, data]}", "bad", "differ in shape"),
    ("  - {name: bad, kind: relu, inputs: [conv1, data]}", "bad", "takes 1 input"),
    ("  - {name: conv1, kind: relu}", "conv1", "duplicate layer name"),
    ("  - {name: bad, kind: fire, params: {squeeze: 2, expand1x1: 4}}", "bad",
     "missing argument 'expand3x3'"),
    ("  - {name: bad, kind: fire, params: {squeeze: 2, expand1x1: 4, expand3x3: 4, x: 1}}",
     "bad", "unknown argument"),
    ("  - {name: 'bad:name', kind: relu}", "bad:name", "bad layer name"),
    ("  - {name: bad, kind: relu, params: {slope: 1}}", "bad", "unknown param"),
    ("  - {name: bad, kind: conv, param: {num_output: 4}}", "bad", "unknown key"),
])
def test_definition_errors_name_file_and_layer(tmp_path, snippet, layer, fragment):
    path = write(tmp_path, TINY % snippet)
    with pytest.raises(WorkloadError) as info:
        load_network(path)
    msg = str(info.value)
    assert "net.yaml" in msg
    assert f"layer '{layer}'" in msg
    assert fragment in msg
    assert isinstance(info.value, ValueError)


def test_in_place_after_a_reader_is_rejected(tmp_path):
    path = write(tmp_path, TINY % "  - {name: p, kind: pool, inputs: [conv1], params: {kernel_size: 2}}\n"
                                  "  - {name: late, kind: relu, inputs: [conv1]}")
    with pytest.raises(WorkloadError, match=r"layer 'late': in-place relu modifies tensor 'conv1'"):
        load_network(path)


def test_file_level_errors(tmp_path):
    with pytest.raises(WorkloadError, match="no network 'vgg17'"):
        load_network("vgg17")
    with pytest.raises(WorkloadError) as err:
        load_network(write(tmp_path, "layers: [ {name: a\n", "broken.yaml"))
    assert "broken.yaml: invalid YAML: line 2, column 1: " in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(WorkloadError, match="'layers' must be a non-empty list"):
        load_network(write(tmp_path, "name: x\n", "empty.yaml"))
    with pytest.raises(WorkloadError, match="unknown top-level key"):
        load_network(write(tmp_path, "name: x\nlayer: []\n", "typo.yaml"))
    recursive = write(tmp_path, """\
        macros:
          loop: {layers: [{name: a, kind: loop}]}
        layers:
          - {name: data, kind: data, params: {shape: [3, 4, 4]}}
          - {name: l, kind: loop}
        """, "rec.yaml")
    with pytest.raises(WorkloadError, match="recursive"):
        load_network(recursive)
    assert MAX_DEPTH >= 4


def test_infer_rejects_bad_batch_and_dtype():
    import numpy as np

    net = load_network("alexnet")
    assert net.infer(np.int64(2))[1].shape == (2, 96, 55, 55)
    with pytest.raises(WorkloadError, match="dtype"):
        net.infer(1, "int8")
    with pytest.raises(WorkloadError, match="batch"):
        net.infer(0)


def test_a_network_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\nlayers: []\n".encode("latin-1"))
    with pytest.raises(WorkloadError) as err:
        load_network(path)
    assert str(err.value) == f"{path}: not UTF-8 text (byte 0xe9 at offset 9)"


def test_a_transformers_own_options_given_or_not_load_one_network(tmp_path):
    """Leaving out the definition's sequence length and attention, or giving them, builds the
    same network once; other values build another; a CNN and a faulty definition load as
    before."""
    own = load_network("gpt2_small")
    assert load_network("gpt2_small", 1024, "naive") is own
    assert load_network("gpt2_small", 0, "naive") is own
    assert load_network("gpt2_small", 1024) is own
    fused = load_network("gpt2_small", 0, "fused")
    assert fused is not own and load_network("gpt2_small", 1024, "fused") is fused
    short = load_network("gpt2_small", 512)
    assert short is not own and short.tensors(1)["embed"].shape != own.tensors(1)["embed"].shape
    assert load_network("alexnet") is load_network("alexnet", 0, "")
    body = (Path(__file__).resolve().parents[2] / "workloads" / "networks" /
            "gpt2_small.yaml").read_text().replace("seq_len: 1024", "seq_len: true")
    with pytest.raises(WorkloadError, match="transformer field 'seq_len': must be a positive"):
        load_network(write(tmp_path, body))
