"""Measure what each codec does to a model's states — weights, gradients, fp32 master weights
and Adam moments — in the element types mixed-precision training holds them in, and train the
small text transformer to measure them at points of training.

:func:`measure_states` compresses each tensor of each role as one stream with every codec;
:func:`train_and_measure_states` trains :class:`~sst_cdma.tools.capture.text_model.TextTransformer`
with AdamW (as :mod:`~sst_cdma.tools.capture.text_train` does) and measures at each checkpoint;
:func:`states_from_checkpoint` reads the states of a user's saved checkpoint;
:func:`model_state_document` writes the file :mod:`sst_cdma.profiles.model_states` reads.
"""
from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from sst_cdma.codecs.registry import ALGORITHM_NAMES
from sst_cdma.engine.file_reads import FileReadError, open_regular
from sst_cdma.profiles.model_states import FORMAT, MODEL_STATE_ROLES, ROLE_DTYPES, VERSION
from sst_cdma.profiles.model_states import parse_model_states
from sst_cdma.tools.capture.digits_train import _checkpoint_steps
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.capture.model_loader import CHECKPOINT_FILE
from sst_cdma.tools.capture.tensors import convert, nonzero_bits
from sst_cdma.tools.capture.text_data import TextCorpus, load_corpus
from sst_cdma.tools.capture.text_model import TextTransformer
from sst_cdma.tools.capture.text_train import TrainOptions, _lr
from sst_cdma.tools.capture.tool_parsers import SMALL_OPTIONS

__all__ = ["RoleMeasure", "StateCapture", "measure_states", "optimizer_states",
           "train_and_measure_states", "states_from_checkpoint", "model_state_document",
           "SMALL_OPTIONS"]


@dataclass
class RoleMeasure:
    """One role in one element type: elements, non-zero elements, raw and compressed bytes
    (per codec) summed over the model's tensors."""

    elements: int = 0
    nonzeros: int = 0
    raw_bytes: int = 0
    compressed_bytes: dict[str, int] = field(default_factory=dict)

    def ratio(self, codec: str) -> float:
        """Raw over compressed bytes."""
        return self.raw_bytes / self.compressed_bytes[codec]


@dataclass
class StateCapture:
    """The measures of one point of training: ``roles[role][dtype]``."""

    progress: float
    step: int
    roles: dict[str, dict[str, RoleMeasure]] = field(default_factory=dict)


def _words(tensor: torch.Tensor, dtype: str) -> tuple[np.ndarray, str | None]:
    """``tensor`` as the codecs take it in ``dtype``: float32 as is, 16-bit types rounded to
    nearest even (bfloat16 as raw words)."""
    array = np.ascontiguousarray(tensor.detach().to(torch.float32).cpu().numpy()).reshape(-1)
    if dtype == "float32":
        return array, None
    return convert(array, dtype)


def measure_states(states: Mapping[str, Sequence[torch.Tensor]],
                   algorithms: Sequence[str] = ALGORITHM_NAMES
                   ) -> dict[str, dict[str, RoleMeasure]]:
    """Compress every tensor of every role (``weights``, ``gradients``, ``master_weights``,
    ``exp_avg``, ``exp_avg_sq``; a role with no tensors is left out) in each element type of
    :data:`~sst_cdma.profiles.model_states.ROLE_DTYPES` with each codec, one stream per tensor,
    and sum the sizes per role and type."""
    from sst_cdma.codecs import compressed_size

    out: dict[str, dict[str, RoleMeasure]] = {}
    for role, tensors in states.items():
        if role not in MODEL_STATE_ROLES:
            raise CaptureError(f"unknown model-state role {role!r} (expected: "
                               f"{', '.join(MODEL_STATE_ROLES)})")
        tensors = [t for t in tensors if t.numel() > 0]  # an empty one holds no bytes
        if not tensors:
            continue
        out[role] = {}
        for dtype in ROLE_DTYPES[role]:
            measure = out[role][dtype] = RoleMeasure(compressed_bytes=dict.fromkeys(algorithms, 0))
            for tensor in tensors:
                words, element_type = _words(tensor, dtype)
                measure.elements += words.size
                measure.nonzeros += nonzero_bits(words)
                measure.raw_bytes += words.nbytes
                for codec in algorithms:
                    measure.compressed_bytes[codec] += int(
                        compressed_size(words, codec, element_type=element_type))
    return out


def optimizer_states(model: torch.nn.Module, optimizer: torch.optim.Optimizer
                     ) -> dict[str, list[torch.Tensor]]:
    """The model states of a model trained by an Adam-family optimizer: its weights (the fp32
    parameters, which are also the master weights), their gradients where set, and the
    optimizer's ``exp_avg``/``exp_avg_sq`` where it has stepped."""
    params = [p for p in model.parameters() if p.is_floating_point()]
    states: dict[str, list[torch.Tensor]] = {
        "weights": params, "master_weights": params,  # type: ignore[dict-item]
        "gradients": [p.grad for p in params if p.grad is not None]}
    for moment in ("exp_avg", "exp_avg_sq"):
        states[moment] = [optimizer.state[p][moment] for p in params
                          if moment in optimizer.state.get(p, {})]
    return states


def _step(model: TextTransformer, corpus: TextCorpus, generator: torch.Generator,
          options: TrainOptions) -> None:
    """Forward and backward on the next batch: the gradients of this step."""
    model.train()
    x, y = corpus.batch(generator, options.batch, options.config.seq)
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()


def train_and_measure_states(activation: str = "relu", steps: int = 200,
                             checkpoints: Sequence[float] = (0.0, 0.05, 0.25, 1.0),
                             seed: int = 0, *, options: TrainOptions = SMALL_OPTIONS,
                             corpus: TextCorpus | None = None,
                             algorithms: Sequence[str] = ALGORITHM_NAMES,
                             show: Callable[[StateCapture], None] | None = None,
                             ) -> list[StateCapture]:
    """Train the ``activation`` text model with ``text_train``'s AdamW recipe for ``steps``
    steps and measure its states at each checkpoint: after ``round(p * steps)`` updates, the
    weights and moments as they stand and the gradients of the next batch (computed, and
    applied unless it is the last checkpoint: training stops there). Seeded as ``text_train``
    is, so the first checkpoints of a long run are those of a short one."""
    at = _checkpoint_steps(steps, checkpoints)
    options = replace(options, config=replace(options.config, activation=activation))
    corpus = corpus or load_corpus()
    captures: list[StateCapture] = []
    old_threads = torch.get_num_threads()
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = TextTransformer(options.config)
            generator = torch.Generator().manual_seed(seed)
            optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr)
            for step in range(steps + 1):
                _step(model, corpus, generator, options)
                if step in at:
                    capture = StateCapture(at[step], step, measure_states(
                        optimizer_states(model, optimizer), algorithms))
                    captures.append(capture)
                    if show is not None:
                        show(capture)
                if step == max(at):  # nothing left to measure
                    break
                for group in optimizer.param_groups:
                    group["lr"] = _lr(step, options)
                optimizer.step()
    finally:
        torch.set_num_threads(old_threads)
    return captures


def states_from_checkpoint(path: str) -> dict[str, list[torch.Tensor]]:
    """The model states in a file saved with ``torch.save({"model": model.state_dict(),
    "optimizer": optimizer.state_dict(), "gradients": {name: p.grad}})`` (``optimizer`` and
    ``gradients`` optional; a bare ``state_dict`` is the weights alone). Weights are also
    the master weights when they are float32."""
    try:
        fh = open_regular(path, CHECKPOINT_FILE)
    except FileReadError as exc:
        raise CaptureError(f"{path}: cannot read: {exc}") from None
    try:
        with fh:
            saved = torch.load(fh, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CaptureError(f"{path}: not a readable torch checkpoint: {reason}") from None
    if not isinstance(saved, dict):
        raise CaptureError(f"{path}: expected a dict, got {type(saved).__name__}")
    model = saved.get("model", saved)
    weights = [t for t in model.values() if isinstance(t, torch.Tensor) and t.is_floating_point()
               and t.numel() > 0]
    if not weights:
        raise CaptureError(f"{path}: holds no floating-point weights with an element (a "
                           f"state_dict, or a dict with 'model')")
    states: dict[str, list[torch.Tensor]] = {"weights": weights}
    if all(w.dtype == torch.float32 for w in weights):
        states["master_weights"] = weights
    states["gradients"] = [t for t in dict(saved.get("gradients") or {}).values()
                           if isinstance(t, torch.Tensor)]
    optimizer_state = dict(saved.get("optimizer") or {}).get("state", {})
    for moment in ("exp_avg", "exp_avg_sq"):
        states[moment] = [s[moment] for s in optimizer_state.values()
                          if isinstance(s, dict) and moment in s]
    return states


def _point(capture: StateCapture, role: str) -> dict[str, Any] | None:
    measured = capture.roles.get(role)
    if not measured:
        return None
    return {"progress": capture.progress, "step": capture.step, "dtypes": {
        dtype: {"density": round(m.nonzeros / m.elements, 6),
                "ratios": {c: round(m.ratio(c), 4) for c in m.compressed_bytes}}
        for dtype, m in measured.items()}}


def model_state_document(model: str, parameters: int, captures: Sequence[StateCapture],
                         provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The version-1 model-state profile of ``captures`` (checked before it is returned)."""
    roles: dict[str, Any] = {}
    for role in MODEL_STATE_ROLES:
        points = [p for p in (_point(c, role) for c in sorted(captures,
                                                                  key=lambda c: c.progress))
                  if p is not None]
        if points:
            roles[role] = {"points": points}
    doc = {"format": FORMAT, "version": VERSION, "model": model, "parameters": parameters,
           "provenance": dict(provenance), "roles": roles}
    parse_model_states(doc, f"model-state profile of {model}")
    return doc
