"""With ``--workload FILE`` (a stream that declares its own tensors, ops and times), every
option of the elements only a rendered network builds is refused, naming it: the list comes
from the options' declarations, so an option added to those elements can never be accepted
and silently ignored (``--seq-len``, ``--attention`` and ``--tf32`` once were)."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.builder.model_options import RENDERED_ONLY, options_of, option_param
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stream(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("stream") / "alexnet.stream"
    subprocess.run([sys.executable, "-m", "sst_cdma.tools.workloads", "render", "alexnet", "--batch", "2",
                    "-o", str(path)], check=True, cwd=REPO, capture_output=True)
    return path


#: values of the options whose texts are parsed by their own grammar
VALUES = {"--policy": "all", "--network": "alexnet", "--plan": "plan.json",
          "--layer-times": "times.json"}


def a_value(opt) -> str:
    """A value the option takes that differs from its default where it can."""
    if opt.flag in VALUES:
        return VALUES[opt.flag]
    param = option_param(opt)
    choices = [str(c) for c in param.choices or () if str(c) not in ("", str(param.default))]
    if choices:
        return choices[0]
    return {"int": "2", "float": "0.5", "bytes": "1MiB", "bool": ""}.get(param.kind, "x")


def test_the_rendered_only_options_include_those_that_once_drifted():
    flags = {opt.flag for opt in options_of(*RENDERED_ONLY)}
    assert {"--seq-len", "--attention", "--tf32", "--network", "--layer-times"} <= flags


@pytest.mark.parametrize("opt", options_of(*RENDERED_ONLY), ids=lambda o: o.flag)
def test_each_rendered_only_option_contradicts_a_workload_file(stream, opt):
    value = a_value(opt)
    given = [opt.flag] + ([value] if value else [])
    with pytest.raises(RunError, match=f"{opt.flag} contradicts --workload: it applies to a "
                                       "rendered --network"):
        sst_cdma.run(REPO / "topologies" / "pascal_cdma.py",
                     ["--workload", str(stream), "--no-baselines", *given],
                     console=io.StringIO(), run_mode="init")
