"""Estimated activation-density profiles for the shipped networks (not measured).

The seven networks of ``workloads/networks`` (AlexNet, OverFeat, NiN, VGG-16, SqueezeNet,
GoogLeNet, ResNet-50) cannot be trained here, so their shipped profiles
(``workloads/profiles/<network>.json``) are **estimates** built by this module from what the
cDMA paper reports qualitatively (Rhu, O'Connor, Chatterjee, Pool, Keckler, "Compressing DMA
Engine: Leveraging Activation Sparsity for Training Deep Neural Networks", HPCA 2018).
Regenerate every file with::

    python -m sst_cdma.profiles.estimate --all

or one network with ``python -m sst_cdma.profiles.estimate vgg16``; ``--check`` reports
files that differ from what the generator produces without writing anything. The output is
deterministic (no randomness), so regenerating gives byte-identical files.

Which tensors
-------------
Every tensor any vDNN policy may offload: the ``offload NAME`` ops of the stream rendered
with ``policy="all"`` (a superset of ``policy="conv"``), named as in the network definition,
in forward order, each with its per-sample shape.

Density at the end of training (progress 1.0)
---------------------------------------------
The paper measured that ReLU outputs are mostly zeros, that compression averages 2.6x under
ZVC (32/(1+32 d) = 2.6 at d ~ 0.35, so ~35% dense on average over the offloaded layers) with
a maximum of 13.8x, and that density falls with depth: the first convolutions are about half
dense, deep convolution and fully connected layers 10-30%. The rules:

* **ReLU outputs** (a tensor a ReLU modifies in place whose producer is a conv, fc, batchnorm
  or residual add): ``d = D_LAST + (D_FIRST - D_LAST) * (1 - r) ** SHAPE`` with
  ``D_FIRST = 0.55``, ``D_LAST = 0.10``, ``SHAPE = 1.3`` and ``r`` the relative depth in
  [0, 1]: the number of conv/fc layers on the longest path from the input to the tensor's
  producer, minus one, over that number for the deepest layer of the network, minus one
  (VGG-16: conv1_1 is at r = 0, fc7 at 14/15; GoogLeNet counts 22 weighted layers, ResNet-50
  50). Mid-depth layers come out near 0.28, the last conv layers 0.10-0.15. The constants
  are chosen so that the plain mean over the post-ReLU offloaded tensors at the end of
  training, averaged over the seven networks, is 0.35 (each network lands between 0.31 and
  0.43: networks with many pooled or LRN tensors, like AlexNet, come out denser).
* **Max and average pooling** of a sparse input are denser than the input: an output is zero
  only when its whole window is. With a window of ``k = kh * kw`` elements, ``d_out = 1 -
  (1 - d_in) ** (1 + ALPHA * (k - 1))``, ``ALPHA = 0.125``: as if only one element in eight
  beyond the first were independent (neighbouring activations are strongly correlated).
  A 3x3 window doubles the exponent (d 0.30 -> 0.51), a 2x2 one gives 0.30 -> 0.39, and a
  global average pool over a whole plane is nearly dense unless the input is very sparse.
* **LRN** of a ReLU output keeps every zero a zero and every non-zero non-zero: same density.
* **Concat** of ReLU-like inputs is ReLU-like: the element-weighted mean of its inputs.
* **Dropout** (in place) keeps zeros, and in training also zeroes a further ``ratio`` of the
  elements; the offloaded tensor is the post-dropout one, so ``d * (1 - ratio)``. This makes
  the fc6/fc7 inputs the sparsest tensors (0.05-0.07, ZVC 11-12x, the order of the paper's
  13.8x maximum).
* **Dense tensors**, not produced by a ReLU nor derived from one by the rules above: the
  network input image, convolution outputs that feed a batchnorm, batchnorm outputs that feed
  a residual add (ResNet-50), the classifier's logits: density 1.0.

Density over training progress
-------------------------------
Points at progress 0, 0.05, 0.1, 0.25, 0.5, 0.75, 1. The paper observed that density changes
over training; the shape used here is an estimate, not a measurement: every ReLU output starts
at ``D_INIT = 0.5`` (random weights make pre-activations symmetric about zero), density drops
quickly to a minimum ``DIP = 0.88`` times its final value at progress 0.1 (80% of the way there
at 0.05), then drifts back up to the final value, decelerating
(``1 - exp(-3 (p - 0.1))``, normalised). Early layers whose final density exceeds 0.5 show no
dip, only a slow rise. Pooled, normalised, concatenated and dropped-out tensors are derived
from their inputs at every point by the rules above.

The shape agrees with the measured trend of the ``digits_cnn`` profile
(``workloads/profiles/digits_cnn.json``, made by ``python -m sst_cdma.tools.capture.digits_train``:
DigitsCNN trained on the scikit-learn digits, 3000 steps, seed 0): its deeper ReLU outputs
``relu2`` / ``relu3`` (tensors ``conv2`` / ``fc1`` there) start at 0.51 / 0.55, bottom out at 0.34 / 0.35 within the first 5% of
training (progress 0.05 / 0.02) and drift back up to 0.39 / 0.41 at the end, decelerating,
i.e. the minimum is 0.87 / 0.85 of the final density, which ``DIP`` follows. Its first layer
``relu1`` (tensor ``conv1``; fed by 8x8 images, about half of whose pixels are zero) instead rises from 0.34 to
0.45; the estimate puts the first layers of the ImageNet networks, whose inputs are dense, at
a flat-to-rising 0.50 -> 0.55. The digits minimum comes earlier (0.02-0.05) than the
estimate's (0.1): a small network on an easy task converges within a few hundred steps.

What the profile does not hold: measured compression ratios (``ratios``). The simulator asks
each registered codec for its ratio at the density (``sst_cdma.codecs.registry``): RLE and
zlib by running the real codecs on synthetic data; ZVC's fp32 ratio follows from density
alone, 32 / (1 + 32 d) (docs/codecs.md, "Size formulas").
"""
from __future__ import annotations

import argparse
import math
from importlib import resources
from pathlib import Path
from typing import Iterable, Optional, Sequence

from workloads.loader import CNNS

from sst_cdma.codecs import registry
from sst_cdma.codecs.sampling import estimate_ratio
from sst_cdma.engine.file_reads import FileReadError, read_text
from sst_cdma.profiles.profile import PROFILE_FILE, DensityProfile, ProfilePoint, TensorProfile
from sst_cdma.profiles.provenance import EstimatedProvenance

__all__ = [
    "NETWORKS",
    "PROGRESS",
    "D_INIT",
    "D_FIRST",
    "D_LAST",
    "SHAPE",
    "DIP",
    "ALPHA",
    "COMMAND",
    "offloadable_tensors",
    "final_relu_density",
    "training_curve",
    "pool_density",
    "estimate_profile",
    "profile_summary",
    "zvc_ratio",
    "main",
]

#: Networks with an estimated shipped profile: the shipped CNNs.
NETWORKS: tuple[str, ...] = CNNS
#: Training progress of the points of every tensor.
PROGRESS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
#: Density of every ReLU output at initialisation (symmetric pre-activations).
D_INIT = 0.5
#: Final density of a ReLU output at relative depth 0 (the first convolution).
D_FIRST = 0.55
#: Final density of a ReLU output at relative depth 1 (the deepest weighted layer).
D_LAST = 0.10
#: Exponent of the fall of final density with relative depth (> 1: falls faster early on).
SHAPE = 1.3
#: Minimum of the training curve (at progress ``DIP_AT``) relative to the final density.
DIP = 0.88
#: Progress at which the density is lowest.
DIP_AT = 0.1
#: How much of the drop from ``D_INIT`` to the minimum is done by progress 0.05.
EARLY_DROP = 0.8
#: Rate of the drift back up after the minimum (per unit of progress).
RECOVERY_RATE = 3.0
#: Fraction of a pooling window's extra elements counted as independent.
ALPHA = 0.125
#: Decimal places of the densities written to the files.
DIGITS = 4
#: The command that regenerates every shipped estimated profile.
COMMAND = "python -m sst_cdma.profiles.estimate --all"

_WEIGHTED = ("conv", "fc")
_RELU_PRODUCERS = ("conv", "fc", "batchnorm", "add")
_PACKAGE = "workloads.profiles"

SOURCE = (
    "Estimate, not a measurement. Rests on what the cDMA paper (Rhu, O'Connor, Chatterjee, "
    "Pool, Keckler, 'Compressing DMA Engine: Leveraging Activation Sparsity for Training Deep "
    "Neural Networks', HPCA 2018) reports qualitatively: ReLU outputs are mostly zeros, ZVC "
    "averages 2.6x (32/(1+32d) = 2.6 at density d ~ 0.35, so ~35% dense on average over the "
    "offloaded layers; maximum 13.8x), density falls with depth (first convolutions ~50-60% "
    "dense, deep conv/fc layers ~10-30%), and density changes over training. Rules: a ReLU "
    "output's final density is 0.10 + (0.55 - 0.10) * (1 - r)^1.3, r = relative depth (conv/fc "
    "layers on the longest path from the input, normalised over the network), calibrated so "
    "that the mean over the post-ReLU offloaded tensors at the end of training, averaged over "
    "the seven shipped networks, is 0.35; max/avg pooling is denser "
    "than its input, d_out = 1 - (1 - d_in)^(1 + 0.125 (k - 1)) for a k-element window; LRN "
    "keeps the density of its ReLU input; concat is the element-weighted mean of its "
    "(ReLU-like) inputs; in-place dropout keeps zeros and zeroes a further 'ratio' of elements "
    "(d * (1 - ratio)); residual-add outputs after their ReLU are ReLU outputs; the input "
    "image, conv outputs feeding a batchnorm, batchnorm outputs feeding an add (ResNet-50) and "
    "the logits are dense (1.0). Over training (an estimated shape): every ReLU output starts "
    "at 0.5, drops quickly to 0.88x its final density by progress 0.1 (80% of the drop by "
    "0.05), then drifts back up, decelerating, to the final density at 1.0; derived tensors "
    "follow their inputs. Full statement: sst_cdma/profiles/estimate.py."
)

DIGITS_COMPARISON = (
    "Compared with the measured trend of the digits_cnn profile "
    "(workloads/profiles/digits_cnn.json, from python -m sst_cdma.tools.capture.digits_train: "
    "DigitsCNN on the scikit-learn digits, 3000 steps, seed 0): its deeper ReLU outputs "
    "relu2/relu3 (tensors conv2/fc1 there) start at 0.51/0.55, bottom out at 0.34/0.35 within the first 5% of training "
    "(progress 0.05/0.02) and drift back up to 0.39/0.41 at 1.0 (minimum 0.87/0.85 of the "
    "final value), the same shape as this estimate, whose minimum comes later (0.1); its first "
    "layer relu1 (tensor conv1; fed by digit images, about half of whose pixels are zero) rises instead, "
    "0.34 -> 0.45, as the estimate's first layers do mildly (0.50 -> 0.55)."
)


# -- the rules ------------------------------------------------------------------------------------

def final_relu_density(r: float) -> float:
    """Density at the end of training of a ReLU output at relative depth ``r`` in [0, 1]."""
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"relative depth {r} is not in [0, 1]")
    return D_LAST + (D_FIRST - D_LAST) * (1.0 - r) ** SHAPE


def training_curve(final: float, progress: float) -> float:
    """Density at ``progress`` of a ReLU output whose density at the end is ``final``.

    Starts at :data:`D_INIT`, reaches ``DIP * final`` at :data:`DIP_AT` (``EARLY_DROP`` of the
    way by progress 0.05, linearly in between), then rises to ``final`` at progress 1 along a
    normalised ``1 - exp(-RECOVERY_RATE * (p - DIP_AT))``.
    """
    if not 0.0 <= progress <= 1.0:
        raise ValueError(f"progress {progress} is not in [0, 1]")
    low = DIP * final
    if progress <= DIP_AT:
        half = DIP_AT / 2
        mid = D_INIT + EARLY_DROP * (low - D_INIT)
        if progress <= half:
            return D_INIT + (mid - D_INIT) * progress / half
        return mid + (low - mid) * (progress - half) / half
    span = 1.0 - DIP_AT
    shape = (1.0 - math.exp(-RECOVERY_RATE * (progress - DIP_AT))) \
        / (1.0 - math.exp(-RECOVERY_RATE * span))
    return low + (final - low) * shape


def pool_density(d_in: float, window: int) -> float:
    """Density of a max/avg pooling output over ``window`` elements of an input of ``d_in``."""
    if window < 1:
        raise ValueError(f"pooling window must have at least one element, got {window}")
    return 1.0 - (1.0 - d_in) ** (1.0 + ALPHA * (window - 1))


def zvc_ratio(density: float) -> float:
    """ZVC's fp32 compression ratio at ``density``, 32 / (1 + 32 d): the ZVC codec's own
    estimate from its registration (docs/codecs.md, "Size formulas")."""
    return estimate_ratio(registry.get("zvc"), density, "float32")


# -- applying them to a network ------------------------------------------------------------------

def offloadable_tensors(network) -> list[str]:
    """Names of the tensors ``policy="all"`` offloads (every layer input), in stream order.

    ``network`` is a name, a YAML path or a loaded ``Network``; read from the rendered stream.
    """
    from workloads import parse_stream, render_stream

    stream = parse_stream(render_stream(network, 1, policy="all"), source="policy=all stream")
    return list(dict.fromkeys(op.name for op in stream.ops if op.op == "offload"))


def _network(network):
    """A loaded ``Network`` from a name, a path or a ``Network``."""
    from workloads import Network, load_network

    return network if isinstance(network, Network) else load_network(network)


def _depths(net) -> tuple[dict[str, int], int]:
    """Weighted depth of each layer (conv/fc layers on the longest path from the input)."""
    depth: dict[str, int] = {}
    for layer in net.layers:
        base = max((depth[i] for i in layer.inputs), default=0)
        depth[layer.name] = base + (1 if layer.kind in _WEIGHTED else 0)
    return depth, max(depth.values())


def _final_densities(net) -> tuple[dict[str, float], dict[str, tuple[float, ...]]]:
    """Per tensor: relative depth of ReLU outputs, and the densities at every point."""
    depth, deepest = _depths(net)
    tensors = net.tensors(1)
    curves: dict[str, tuple[float, ...]] = {}
    relative: dict[str, float] = {}
    for name, info in tensors.items():
        producer = net.layer(info.producer)
        modifiers = [net.layer(m) for m in info.modifiers]
        relu = any(m.kind == "relu" for m in modifiers)
        if producer.kind == "data":
            curve = tuple(1.0 for _ in PROGRESS)
        elif producer.kind in ("pool", "lrn", "concat") and all(
                tensors[t].sparse for t in producer.input_tensors):
            inputs = [curves[t] for t in producer.input_tensors]
            if producer.kind == "lrn":
                curve = inputs[0]
            elif producer.kind == "concat":
                sizes = [math.prod(tensors[t].shape) for t in producer.input_tensors]
                total = sum(sizes)
                curve = tuple(sum(c[i] * s for c, s in zip(inputs, sizes)) / total
                              for i in range(len(PROGRESS)))
            else:
                curve = tuple(pool_density(d, _window(producer, tensors)) for d in inputs[0])
        elif relu and producer.kind in _RELU_PRODUCERS:
            r = (depth[producer.name] - 1) / (deepest - 1) if deepest > 1 else 0.0
            r = min(max(r, 0.0), 1.0)
            relative[name] = r
            final = final_relu_density(r)
            curve = tuple(training_curve(final, p) for p in PROGRESS)
        else:
            curve = tuple(1.0 for _ in PROGRESS)
        for m in modifiers:
            if m.kind == "dropout":
                keep = 1.0 - float(m.params["ratio"])
                curve = tuple(d * keep for d in curve)
        curves[name] = curve
    return relative, curves


def _window(layer, tensors) -> int:
    """Elements in one pooling window of ``layer`` (the whole plane when global)."""
    if layer.params.get("global"):
        shape = tensors[layer.input_tensors[0]].shape
        return int(math.prod(shape[2:]))
    kh, kw = layer.params["kernel_size"]
    return int(kh * kw)


def estimate_profile(network: str) -> DensityProfile:
    """The estimated density profile of shipped ``network`` (deterministic)."""
    net = _network(network)
    names = offloadable_tensors(net)
    _, curves = _final_densities(net)
    shapes = net.tensors(1)
    tensors: dict[str, TensorProfile] = {}
    for name in names:
        points = tuple(ProfilePoint(p, round(d, DIGITS)) for p, d in zip(PROGRESS, curves[name]))
        tensors[name] = TensorProfile(points, tuple(shapes[name].shape[1:]))
    provisional = DensityProfile(net.name, "float32", EstimatedProvenance(SOURCE), tensors,
                                 source=f"estimate of {net.name}")
    notes = (f"Generated by: {COMMAND} (sst_cdma/profiles/estimate.py). "
             + _summary_text(provisional, net) + " " + DIGITS_COMPARISON)
    return DensityProfile(net.name, "float32", EstimatedProvenance(SOURCE, notes), tensors,
                          source=f"estimate of {net.name}")


def _sparse_names(profile: DensityProfile, net) -> list[str]:
    """The profile's tensors the network marks post-ReLU (sparse), in profile order."""
    shapes = net.tensors(1)
    return [n for n in profile.tensors if n in shapes and shapes[n].sparse]


def profile_summary(profile: DensityProfile, network=None) -> dict[float, dict[str, float]]:
    """Per progress point: mean density of the sparse offloaded tensors (``mean``), the
    byte-weighted mean (``weighted``) and ZVC's ratio at the weighted mean (``zvc``)."""
    net = _network(network or profile.network)
    sparse = _sparse_names(profile, net)
    if not sparse:
        raise ValueError(f"profile of {profile.network!r} has no post-ReLU tensor of {net.name!r}")
    shapes = net.tensors(1)
    sizes = {n: math.prod(shapes[n].shape) for n in sparse}
    out: dict[float, dict[str, float]] = {}
    for p in PROGRESS:
        dens = {n: profile.density(n, p) for n in sparse}
        mean = sum(dens.values()) / len(dens)
        weighted = sum(dens[n] * sizes[n] for n in sparse) / sum(sizes.values())
        out[p] = {"mean": mean, "weighted": weighted, "zvc": zvc_ratio(weighted)}
    return out


def _summary_text(profile: DensityProfile, net) -> str:
    summary = profile_summary(profile, net)
    parts = []
    for p in (0.0, 0.1, 1.0):
        s = summary[p]
        parts.append(f"progress {p:g}: mean {s['mean']:.3f}, byte-weighted {s['weighted']:.3f} "
                     f"(ZVC {s['zvc']:.2f}x)")
    count = len(_sparse_names(profile, net))
    return (f"Density of the {count} post-ReLU (sparse) offloaded tensors of {net.name}: "
            + "; ".join(parts) + ".")


# -- files and command line ----------------------------------------------------------------------

def shipped_dir() -> Path:
    """Folder of the shipped profiles (``workloads/profiles``)."""
    return Path(str(resources.files(_PACKAGE)))


def write_profiles(networks: Iterable[str], directory: str | Path | None = None,
                   *, check: bool = False) -> dict[str, bool]:
    """Write (or with ``check`` only compare) ``NETWORK.json`` in ``directory`` for each
    network; returns network -> whether the file was (or would be) changed."""
    folder = Path(directory) if directory is not None else shipped_dir()
    changed: dict[str, bool] = {}
    for name in networks:
        text = estimate_profile(name).to_json()
        path = folder / f"{name}.json"
        try:
            old: Optional[str] = read_text(path, PROFILE_FILE)
        except FileReadError:  # missing (or not a profile file): written anew
            old = None
        changed[name] = old != text
        if not check and changed[name]:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
    return changed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sst_cdma.profiles.estimate",
        description="Generate the estimated activation-density profiles of the shipped networks "
                    "(workloads/profiles/NETWORK.json).")
    parser.add_argument("networks", nargs="*", metavar="NETWORK",
                        help=f"networks to generate (of: {', '.join(NETWORKS)})")
    parser.add_argument("--all", action="store_true", help="generate every network")
    parser.add_argument("--output-dir", metavar="DIR",
                        help="write here instead of the shipped profiles folder")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any file is missing or out of date")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m sst_cdma.profiles.estimate --all``."""
    parser = _parser()
    args = parser.parse_args(argv)
    names = list(NETWORKS) if args.all else list(dict.fromkeys(args.networks))
    if not names:
        parser.error("name networks to generate, or pass --all")
    unknown = [n for n in names if n not in NETWORKS]
    if unknown:
        parser.error(f"no estimate for {', '.join(unknown)} (known: {', '.join(NETWORKS)})")
    folder = Path(args.output_dir) if args.output_dir else shipped_dir()
    changed = write_profiles(names, folder, check=args.check)
    if not args.quiet:
        for name in names:
            profile = estimate_profile(name)
            s = profile_summary(profile)
            state = ("out of date" if args.check else "written") if changed[name] else "unchanged"
            print(f"{name:11} {len(profile.tensors):4d} tensors  mean density "
                  f"p0 {s[0.0]['mean']:.3f}  p0.1 {s[0.1]['mean']:.3f}  p1 {s[1.0]['mean']:.3f}"
                  f"  ZVC@p1 {s[1.0]['zvc']:.2f}x  {folder / (name + '.json')}: {state}")
    return 1 if args.check and any(changed.values()) else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
