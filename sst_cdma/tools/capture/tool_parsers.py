"""The option parsers of the PyTorch-based measuring commands, without PyTorch: ``sst-cdma
time-cpu-adam --help`` and ``sst-cdma capture-states --help`` print from here (importing
PyTorch takes seconds, up to tens on a cold machine), and the commands parse with the same
parsers (:mod:`.cpu_adam_cli`, :mod:`.states_cli`)."""
from __future__ import annotations

import argparse

from sst_cdma.codecs.registry import algorithm_names
from sst_cdma.model.cpu_adam import DEFAULT_CPU_ADAM, IMPLEMENTATIONS
from sst_cdma.tools.capture.text_config import ACTIVATIONS, TextConfig, TrainOptions
from sst_cdma.tools.capture.tool_main import ToolParser

__all__ = ["CPU_ADAM_PROG", "DEFAULT_SIZES", "cpu_adam_parser", "STATES_PROG", "DEFAULT_STEPS",
           "DEFAULT_CHECKPOINTS", "SMALL_OPTIONS", "states_parser", "HELP_PARSERS"]

#: the shipped profile's model and training: text_train's model at a quarter of the width and
#: half the depth and sequence (CPU-cheap), otherwise text_train's recipe
SMALL_OPTIONS = TrainOptions(config=TextConfig(blocks=2, hidden=128, heads=4, ffn=512, seq=128))

CPU_ADAM_PROG = "sst-cdma time-cpu-adam"
DEFAULT_SIZES = "256Ki,4Mi,16Mi"


def cpu_adam_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sst-cdma time-cpu-adam``."""
    p = ToolParser(prog=CPU_ADAM_PROG, description="Time the CPU AdamW step (fp32 master weights "
                   "and moments, fp32 gradient, a bfloat16 weight copy written back, as "
                   "ZeRO-Offload runs it on the host) of PyTorch's implementations and, where "
                   "DeepSpeed is installed, of its DeepSpeedCPUAdam, for each size and thread "
                   "count, and write the parameters updated per second to a CPU Adam file.")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--output", "-o", metavar="FILE.json", help="CPU Adam file to write")
    out.add_argument("--write-default", action="store_true",
                     help=f"replace the shipped default measurement ({DEFAULT_CPU_ADAM.name} "
                          "in the installed package) with this one")
    p.add_argument("--sizes", default=DEFAULT_SIZES, metavar="N,...",
                   help=f"total parameters per step, e.g. 4Mi or 4194304 (default "
                        f"{DEFAULT_SIZES}); the largest gives the headline figures")
    p.add_argument("--tensors", type=int, default=16, metavar="N",
                   help="split each size into this many equal tensors (default 16)")
    p.add_argument("--threads", default="1,all", metavar="N,...",
                   help="thread counts (torch.set_num_threads), 'all' for every core this "
                        "process may use (default 1,all)")
    p.add_argument("--implementations", default=",".join(IMPLEMENTATIONS), metavar="NAME,...",
                   help=f"of {', '.join(IMPLEMENTATIONS)} (default all; those this machine "
                        "cannot run on the CPU, deepspeed where DeepSpeed is not installed, "
                        "are recorded as unavailable)")
    p.add_argument("--repeat", type=int, default=7, help="timed steps per measurement; the "
                   "fastest counts, the median is recorded too (default 7)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--quiet", "-q", action="store_true", help="print no table")
    return p


STATES_PROG = "sst-cdma capture-states"
DEFAULT_STEPS = 200
DEFAULT_CHECKPOINTS = "0,0.05,0.25,1"


def states_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sst-cdma capture-states``."""
    small = SMALL_OPTIONS.config
    p = ToolParser(prog=STATES_PROG, description="Measure the compression ratio of every codec on a "
                   "model's weights and gradients (float32, bfloat16, float16), fp32 master "
                   "weights and Adam moments (exp_avg, exp_avg_sq) at points of training, "
                   "each tensor one stream, and write a model-state profile. Without "
                   "--checkpoint it trains the small byte-level text transformer here (AdamW, "
                   "text_train's recipe) and measures it as it trains.")
    p.add_argument("--output", "-o", metavar="FILE.json", help="profile file to write")
    p.add_argument("--checkpoint", action="append", default=[], metavar="P=FILE.pt",
                   help="measure the states saved in FILE.pt (torch.save of {'model': "
                        "state_dict, 'optimizer': optimizer.state_dict(), 'gradients': "
                        "{name: grad}}; the last two optional) at progress P; repeatable")
    p.add_argument("--model-name", default="", help="the profile's model name (default: "
                   "text_ACTIVATION_small, or the first checkpoint's file name)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                   help=f"AdamW steps of the training run (default {DEFAULT_STEPS}); with "
                        "--checkpoint, the steps the progress axis spans, if known")
    p.add_argument("--checkpoints", default=DEFAULT_CHECKPOINTS, metavar="P,...",
                   help=f"progress points of the training run to measure at (default "
                        f"{DEFAULT_CHECKPOINTS})")
    p.add_argument("--activation", choices=ACTIVATIONS, default="relu",
                   help="FFN activation of the trained model (default relu)")
    for name in ("blocks", "hidden", "heads", "ffn", "seq"):
        p.add_argument(f"--{name}", type=int, default=getattr(small, name),
                       help=f"model size (default {getattr(small, name)})")
    p.add_argument("--batch", type=int, default=SMALL_OPTIONS.batch,
                   help=f"windows per batch (default {SMALL_OPTIONS.batch})")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and batches")
    p.add_argument("--algorithms", default=",".join(algorithm_names()),
                   help=f"codecs to measure (default every registered one, "
                        f"{','.join(algorithm_names())})")
    p.add_argument("--quiet", "-q", action="store_true", help="print no table")
    return p


#: ``sst-cdma`` command -> the function building its parser (``--help`` without PyTorch)
HELP_PARSERS = {"time-cpu-adam": cpu_adam_parser, "capture-states": states_parser}
