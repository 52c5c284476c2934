"""``sst-cdma capture-states``: the model states measured with the real codecs, a tiny training
run and a user's checkpoints written as profiles the loader reads, and bad options refused in
one line."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sst_cdma.tools.capture.errors import CaptureError  # noqa: E402
from sst_cdma.tools.capture.model_states import measure_states, states_from_checkpoint  # noqa: E402
from sst_cdma.tools.capture.states_cli import main  # noqa: E402
from sst_cdma.codecs import compressed_size  # noqa: E402
from sst_cdma.codecs.sampling import bfloat16_words  # noqa: E402
from sst_cdma.profiles.model_states import (MODEL_STATE_ROLES, load_model_states,  # noqa: E402
                                            model_state_ratio)

TINY = ["--blocks", "1", "--hidden", "16", "--heads", "2", "--ffn", "32", "--seq", "8",
        "--batch", "2", "--algorithms", "zvc,zstd,bplane_zstd"]


def test_each_tensor_is_one_stream_in_each_element_type():
    a = torch.tensor([0.0, 1.5, -2.25, 0.0, 3.0])
    b = torch.zeros(7)
    measured = measure_states({"gradients": [a, b], "exp_avg": [b]}, ["zvc", "zstd"])
    assert set(measured) == {"gradients", "exp_avg"}
    grads = measured["gradients"]
    assert set(grads) == {"float32", "float16", "bfloat16"} and set(measured["exp_avg"]) == \
        {"float32"}
    assert grads["float32"].elements == 12 and grads["float32"].nonzeros == 3
    assert grads["float32"].raw_bytes == 48 and grads["bfloat16"].raw_bytes == 24
    words = [bfloat16_words(t.numpy()) for t in (a, b)]
    assert grads["bfloat16"].compressed_bytes["zstd"] == sum(
        compressed_size(w, "zstd", element_type="bfloat16") for w in words)
    assert grads["float16"].compressed_bytes["zvc"] == sum(
        compressed_size(t.numpy().astype(np.float16), "zvc") for t in (a, b))


def test_an_unknown_role_is_refused():
    with pytest.raises(CaptureError, match="unknown model-state role 'activations'"):
        measure_states({"activations": [torch.ones(3)]}, ["zvc"])


def test_a_tiny_training_run_writes_a_profile_of_every_role(tmp_path):
    out = tmp_path / "states.json"
    assert main(TINY + ["--steps", "3", "--checkpoints", "0,1", "--quiet",
                        "--output", str(out)]) == 0
    profile = load_model_states(out)
    assert set(profile.points) == set(MODEL_STATE_ROLES)
    assert profile.model == "text_relu_small"
    assert [p.step for p in profile.points["weights"]["bfloat16"]] == [0, 3]
    assert [p.step for p in profile.points["exp_avg"]["float32"]] == [3]  # none at step 0
    assert profile.provenance.command.startswith("sst-cdma capture-states --blocks 1")
    assert model_state_ratio("weights", "zstd", "bfloat16", 1.0, profile=profile) > 0
    # the same run twice: the same numbers
    again = tmp_path / "again.json"
    assert main(TINY + ["--steps", "3", "--checkpoints", "0,1", "--quiet",
                        "--output", str(again)]) == 0
    assert json.loads(out.read_text())["roles"] == json.loads(again.read_text())["roles"]


def test_a_users_checkpoints_are_measured(tmp_path):
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(3, 8)).sum().backward()
    optimizer.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "gradients": {n: p.grad for n, p in model.named_parameters()}}, path)
    states = states_from_checkpoint(str(path))
    assert [len(states[r]) for r in MODEL_STATE_ROLES] == [2, 2, 2, 2, 2]
    bare = tmp_path / "bare.pt"
    torch.save(model.state_dict(), bare)
    assert {r for r, t in states_from_checkpoint(str(bare)).items() if t} == \
        {"weights", "master_weights"}
    out = tmp_path / "mine.json"
    assert main(["--checkpoint", f"0.5={path}", "--checkpoint", f"1={bare}", "--model-name",
                 "linear", "--quiet", "--algorithms", "zstd", "--output", str(out)]) == 0
    profile = load_model_states(out)
    assert profile.model == "linear" and profile.parameters == 36
    assert [p.progress for p in profile.points["weights"]["float32"]] == [0.5, 1.0]
    assert [p.progress for p in profile.points["exp_avg"]["float32"]] == [0.5]


@pytest.mark.parametrize("argv,message", [
    (["--algorithms", "brotli"], "--algorithms"),
    (["--heads", "3"], "--heads: 3 does not divide --hidden 16"),
    (["--steps", "0"], "--steps: must be at least 1, got 0"),
    (["--checkpoints", "0,x"], "--checkpoints: '0,x' is not a list of numbers"),
    (["--checkpoints", "0,0.01"], "--checkpoints: checkpoints 0.0 and 0.01 both fall on step 0"),
    # out of order: they were quietly sorted
    (["--checkpoints", "1,0"], "--checkpoints: checkpoint 0 comes after 1: give them in the "
                               "order training reaches them (0,1)"),
    # counts past what trains here: PyTorch's allocator traceback, or a run of years
    (["--hidden", "100000000", "--heads", "1"], "--hidden 100000000 --ffn 32 --seq 8 --batch "
                                                "2 needs at least"),
    (["--steps", "1000000000"], "--steps: 1000000000 is more than 100000 (each step trains"),
    (["--checkpoint", "0.5=missing.pt"], "--checkpoint: missing.pt: no such file"),
    (["--checkpoint", "2=x.pt"], "--checkpoint: '2=x.pt' is not P=FILE with P in [0, 1]"),
    (["--output", "no/such/folder/x.json"], "--output: folder 'no/such/folder' does not exist"),
])
def test_bad_options_are_one_line(capsys, argv, message):
    assert main(TINY + ["--steps", "4"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sst-cdma capture-states: error: ") and message in err
    assert err.count("\n") == 1


def test_a_file_that_is_no_checkpoint_is_one_line(tmp_path, capsys):
    path = tmp_path / "junk.pt"
    path.write_bytes(b"not a checkpoint")
    assert main(["--checkpoint", f"0={path}", "--quiet"]) == 2
    assert "junk.pt: not a readable torch checkpoint" in capsys.readouterr().err


def test_a_zero_size_tensor_in_a_checkpoint_is_measured_as_the_nothing_it_holds(tmp_path):
    """The attack: a checkpoint whose gradients are empty tensors made a role's density a
    division by zero. An empty tensor holds no bytes: the profile is the one without it."""
    model = torch.nn.Linear(8, 4)
    torch.save({"model": {**model.state_dict(), "empty": torch.zeros(0, 5)},
                "gradients": {"g": torch.zeros(0)}}, tmp_path / "with.pt")
    torch.save({"model": model.state_dict()}, tmp_path / "without.pt")
    outs = []
    for name in ("with", "without"):
        out = tmp_path / f"{name}.json"
        assert main(["--checkpoint", f"0={tmp_path / name}.pt", "--model-name", "linear",
                     "--quiet", "--algorithms", "zvc,zstd", "--output", str(out)]) == 0
        outs.append(json.loads(out.read_text())["roles"])
    assert outs[0] == outs[1] and "gradients" not in outs[0] and outs[0]["weights"]
    only_empty = tmp_path / "only.pt"
    torch.save({"empty": torch.zeros(0)}, only_empty)
    with pytest.raises(CaptureError, match="holds no floating-point weights with an element"):
        states_from_checkpoint(str(only_empty))


def test_a_checkpoint_that_is_a_fifo_is_refused_at_once(tmp_path, capsys):
    """The attack: a FIFO named as a checkpoint blocked the command forever."""
    import os

    os.mkfifo(tmp_path / "pipe.pt")
    assert main(["--checkpoint", f"0={tmp_path / 'pipe.pt'}", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "pipe.pt" in err and "FIFO" in err and err.count("\n") == 1


@pytest.mark.slow
def test_the_shipped_profile_is_what_the_command_measures():
    """The shipped run's first two checkpoints (steps 0 and 10 of 200), measured again (about
    a minute on 2 cores)."""
    from sst_cdma.tools.capture.model_states import train_and_measure_states
    from sst_cdma.tools.capture.states_cli import capture_software

    shipped = load_model_states()
    recorded, here = dict(shipped.provenance.software), capture_software()
    differ = sorted(k for k in set(recorded) | set(here) if k != "sst-cdma"
                    and recorded.get(k) != here.get(k))
    if differ:  # float32 sums and zstd's sizes differ with them: no bit-for-bit claim
        pytest.skip("the shipped profile was measured with other software: " + "; ".join(
            f"{k} {recorded.get(k, 'not recorded')} there, {here.get(k)} here" for k in differ))
    captures = train_and_measure_states("relu", 200, (0.0, 0.05), 0,
                                        algorithms=("zvc", "bplane_zstd"))
    for capture in captures:
        for role, by_dtype in capture.roles.items():
            for dtype, measure in by_dtype.items():
                point = next(p for p in shipped.points[role][dtype]
                             if p.progress == capture.progress)
                assert round(measure.nonzeros / measure.elements, 6) == point.density
                for codec in ("zvc", "bplane_zstd"):
                    assert round(measure.ratio(codec), 4) == point.ratios[codec], \
                        (role, dtype, codec, capture.progress)


def test_the_shipped_profile_records_what_its_numbers_depend_on():
    from sst_cdma.tools.capture.states_cli import capture_software

    recorded = load_model_states().provenance.software
    assert set(recorded) == set(capture_software())
    assert recorded["torch_cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX",
                                                "SVE256")
