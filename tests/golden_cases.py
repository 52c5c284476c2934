"""The runs whose outputs must not change when the code is reorganised: each case is a topology
script and its model options; ``tests/data/golden/<case>/`` holds what the run wrote (statistics,
summary, rendered streams, the console). ``python tests/golden_cases.py`` re-blesses them after
an intended change of results."""
from __future__ import annotations

import contextlib
import io
import shutil
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden"
if __name__ == "__main__":  # run as a script, tests/ is first on the path and its
    sys.path.insert(0, str(REPO))  # workloads/ folder would shadow the package

#: case -> (topology script, model options)
CASES: dict[str, tuple[str, list[str]]] = {
    "main-job": ("pascal_cdma.py", []),
    "pascal-vdnn": ("pascal_vdnn.py", ["--network", "alexnet", "--batch", "32"]),
    "hand-wired": ("hand_wired_p100.py", []),
    "googlenet-chunk-rle": ("pascal_cdma.py", ["--network", "googlenet", "--batch", "16",
                                               "--policy", "all", "--algorithm", "rle",
                                               "--mode", "chunk"]),
    "dgx1-squeezenet-zlib": ("dgx1_cdma.py", ["--network", "squeezenet", "--batch", "16",
                                               "--policy", "all", "--algorithm", "zlib"]),
    "gpt2-auto-a100": ("pascal_cdma.py", ["--network", "gpt2_small", "--batch", "8",
                                          "--gpu", "ampere", "--policy", "auto",
                                          "--dtype", "bfloat16"]),
    "opt-recompute-fused": ("pascal_cdma.py", ["--network", "opt_125m", "--batch", "4",
                                               "--policy", "recompute-attn+offload-ffn",
                                               "--attention", "fused", "--optimizer", "adam"]),
    "hgx-data-parallel": ("hgx_h100_cdma.py", ["--network", "resnet50", "--batch", "16"]),
    "roofline-network-wide": ("pascal_cdma.py", ["--network", "nin", "--batch", "32",
                                                 "--kernel-model", "roofline",
                                                 "--allocation", "network-wide",
                                                 "--policy", "all"]),
    "gh200-overfeat": ("gh200_cdma.py", ["--network", "overfeat", "--batch", "32"]),
    "digits-progress": ("pascal_cdma.py", ["--network", "digits_cnn", "--batch", "64",
                                           "--policy", "all", "--progress", "0.05"]),
    "workload-stream": ("pascal_cdma.py", ["--workload",
                                           "tests/data/golden/pascal-vdnn/gpu0.stream",
                                           "--no-baselines", "--algorithm", "zvc"]),
}

#: the files a run writes that the golden copy keeps (trace.json and config.json describe the
#: run rather than its results; config.json grows as elements gain slots)
KEPT = ("StatisticOutput.csv", "summary.json")


def run_case(case: str, out: Path) -> str:
    """Run ``case`` with its outputs in ``out``; return the console text."""
    from sst_cdma.tools.cli.sst_main import main

    script, options = CASES[case]
    argv = ["--output-directory", str(out), str(REPO / "topologies" / script)]
    if options:
        argv += ["--", *options]
    buf = io.StringIO()
    with contextlib.chdir(REPO), redirect_stdout(buf):
        rc = main(argv)
    if rc:
        raise RuntimeError(f"{case}: sst exited {rc}")
    return buf.getvalue()


def outputs(case: str) -> dict[str, str]:
    """What ``case`` writes now: file name -> text (the console as ``console.txt``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        files = {"console.txt": run_case(case, out)}
        for path in sorted(out.iterdir()):
            if path.name in KEPT or path.suffix == ".stream":
                files[path.name] = path.read_text(encoding="utf-8")
    return files


def bless(cases: list[str]) -> None:
    """Write the golden copies of ``cases``."""
    for case in cases:
        folder = GOLDEN / case
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, text in outputs(case).items():
            (folder / name).write_text(text, encoding="utf-8")
        print(f"blessed {case}: {', '.join(sorted(p.name for p in folder.iterdir()))}")


if __name__ == "__main__":
    bless(sys.argv[1:] or list(CASES))
