"""DeepSpeed's CPU Adam in ``sst-cdma time-cpu-adam``: where DeepSpeed imports, its
``DeepSpeedCPUAdam`` is timed beside PyTorch's AdamW and the file says which optimizer and
which DeepSpeed; where it is not installed, or its op does not build, one line says so and
PyTorch's are timed alone. CI has no DeepSpeed, so a stand-in module takes its place: an AdamW
of its own, recording how the tool built it."""
from __future__ import annotations

import json
import sys
import types

import pytest

torch = pytest.importorskip("torch")

from sst_cdma.model.cpu_adam import load_cpu_adam  # noqa: E402
from sst_cdma.tools.capture.cpu_adam_cli import main  # noqa: E402
from sst_cdma.tools.capture.cpu_adam_timing import time_cpu_adam  # noqa: E402
from sst_cdma.tools.capture.deepspeed_adam import deepspeed_adam, deepspeed_version  # noqa: E402
from sst_cdma.tools.capture.errors import Unavailable  # noqa: E402

TINY = ["--sizes", "1Ki", "--threads", "1", "--repeat", "2", "--warmup", "0", "--tensors", "2"]


class FakeCPUAdam(torch.optim.AdamW):
    """A stand-in for ``deepspeed.ops.adam.DeepSpeedCPUAdam``: PyTorch's for-loop AdamW,
    remembering the arguments it was built with."""

    built: list[dict] = []

    def __init__(self, params, lr=1e-3, weight_decay=0.0, adamw_mode=True, **rest):
        FakeCPUAdam.built.append({"lr": lr, "weight_decay": weight_decay,
                                  "adamw_mode": adamw_mode, **rest})
        super().__init__(params, lr=lr, weight_decay=weight_decay, foreach=False)


class FakeBuilder:
    """A stand-in for ``deepspeed.ops.op_builder.CPUAdamBuilder``."""

    def simd_width(self):
        return "-D__AVX512__"


def install_fake(monkeypatch, optimizer=FakeCPUAdam):
    """Put a stand-in DeepSpeed in ``sys.modules``."""
    FakeCPUAdam.built = []
    root = types.ModuleType("deepspeed")
    root.__version__ = "0.19.8"
    ops = types.ModuleType("deepspeed.ops")
    adam = types.ModuleType("deepspeed.ops.adam")
    adam.DeepSpeedCPUAdam = optimizer
    builder = types.ModuleType("deepspeed.ops.op_builder")
    builder.CPUAdamBuilder = FakeBuilder
    for name, module in (("deepspeed", root), ("deepspeed.ops", ops),
                         ("deepspeed.ops.adam", adam), ("deepspeed.ops.op_builder", builder)):
        monkeypatch.setitem(sys.modules, name, module)


def hide_deepspeed(monkeypatch):
    """Make ``import deepspeed`` fail as where it is not installed."""
    for name in ("deepspeed", "deepspeed.ops", "deepspeed.ops.adam", "deepspeed.ops.op_builder"):
        monkeypatch.setitem(sys.modules, name, None)


def test_deepspeed_is_timed_beside_pytorch_and_recorded(monkeypatch, tmp_path):
    install_fake(monkeypatch)
    out = tmp_path / "adam.json"
    assert main([*TINY, "--implementations", "fused,deepspeed", "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    timed = {m["implementation"] for m in doc["measurements"]}
    assert "deepspeed" in timed and "deepspeed" not in doc.get("unavailable", {})
    # built as ZeRO-Offload builds it: AdamW mode, the tool's lr and weight decay
    assert FakeCPUAdam.built[0] == {"lr": 1e-4, "weight_decay": 0.01, "adamw_mode": True}
    assert doc["optimizers"]["deepspeed"] == \
        "deepspeed.ops.adam.DeepSpeedCPUAdam(adamw_mode=True)"
    assert doc["software"]["deepspeed"] == "0.19.8 (cpu_adam op: AVX512)"
    assert "deepspeed.ops.adam.DeepSpeedCPUAdam" in doc["step"]["optimizer"]
    load_cpu_adam(out)  # the file checks


def test_the_deepspeed_step_updates_the_weights(monkeypatch):
    install_fake(monkeypatch)
    weights = [torch.ones(8, requires_grad=True)]
    weights[0].grad = torch.ones(8)
    optimizer = deepspeed_adam(weights, lr=0.1, weight_decay=0.0)
    optimizer.step()
    assert torch.all(weights[0] < 1)
    timings, unavailable = time_cpu_adam([64], [1], ["deepspeed"], tensors=2, repeat=1,
                                         warmup=0)
    assert unavailable == {} and [t.implementation for t in timings] == ["deepspeed"]


def test_without_deepspeed_one_line_says_so_and_pytorch_is_timed_alone(monkeypatch, tmp_path,
                                                                       capsys):
    hide_deepspeed(monkeypatch)
    out = tmp_path / "adam.json"
    assert main([*TINY, "--implementations", "for-loop,deepspeed", "--output", str(out)]) == 0
    said = [x for x in capsys.readouterr().out.splitlines() if x.startswith("deepspeed")]
    assert said == ["deepspeed: unavailable (deepspeed is not installed (pip install deepspeed "
                    "builds its CPU Adam op); PyTorch's implementations are timed alone)"]
    doc = json.loads(out.read_text())
    assert {m["implementation"] for m in doc["measurements"]} == {"for-loop"}
    assert "deepspeed" in doc["unavailable"] and "deepspeed" not in doc["software"]
    assert doc["step"]["optimizer"] == "torch.optim.AdamW"


def test_an_op_that_does_not_build_is_unavailable_with_its_cause(monkeypatch):
    class Broken:
        def __init__(self, *args, **kwargs):
            try:
                raise OSError("ninja: build stopped: subcommand failed.")
            except OSError as exc:
                raise RuntimeError("DeepSpeedCPUAdam requires the cpu_adam op, which failed "
                                   "to build/load.") from exc

    install_fake(monkeypatch, Broken)
    with pytest.raises(Unavailable) as info:
        deepspeed_adam([torch.ones(2, requires_grad=True)], lr=1e-4, weight_decay=0.0)
    text = str(info.value)
    assert text.startswith("deepspeed: DeepSpeedCPUAdam: RuntimeError: ") and "\n" not in text
    assert "failed to build/load. ninja: build stopped" in text


def test_a_missing_deepspeed_has_no_version(monkeypatch):
    hide_deepspeed(monkeypatch)
    with pytest.raises(Unavailable, match="deepspeed is not installed"):
        deepspeed_version()
