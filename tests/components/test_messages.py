"""Every event and init message the cdma elements send each other is a dataclass declared in
components/messages.py, checked on the runs that exercise every link kind: one GPU with its
engine, PCIe and host; eight GPUs behind switches; an NVLink all-reduce; the root complex."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

import components.messages as messages
from sst_cdma.engine.kernel import LinkEnd
from sst_cdma.engine.runner import run

REPO = Path(__file__).resolve().parents[2]
RUNS = {
    "pascal": ("pascal_cdma.py", ["--network", "alexnet", "--batch", "16", "--policy", "all"]),
    "dgx1": ("dgx1_cdma.py", ["--network", "squeezenet", "--batch", "8", "--policy", "all"]),
    "hgx": ("hgx_h100_cdma.py", ["--network", "alexnet", "--batch", "8"]),
    "auto": ("pascal_cdma.py", ["--network", "opt_125m", "--batch", "2", "--policy", "auto",
                                "--gpu", "ampere", "--dtype", "bfloat16"]),
    "root_complex": ("root_complex_4gpu.py", []),
}


@pytest.mark.parametrize("case", sorted(RUNS))
def test_every_message_between_elements_is_a_dataclass_of_the_messages_module(case,
                                                                               monkeypatch):
    sent: list[type] = []
    for method in ("send", "send_untimed"):
        original = getattr(LinkEnd, method)

        def spy(self, event, *args, _original=original, **kwargs):
            sent.append(type(event))
            return _original(self, event, *args, **kwargs)
        monkeypatch.setattr(LinkEnd, method, spy)
    script, options = RUNS[case]
    run(REPO / "topologies" / script, options, console=io.StringIO())
    assert sent, "the run sent nothing"
    for kind in set(sent):
        assert dataclasses.is_dataclass(kind) and kind.__module__ == messages.__name__, kind


def test_the_contracts_are_frozen_where_they_describe_a_workload():
    for record in (messages.MovedTensor, messages.OffloadManifest, messages.GradientManifest,
                   messages.CopyCost):
        assert record.__dataclass_params__.frozen, record
