"""Where a profile's numbers come from: measured here (and how) or a documented estimate."""
from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping, Union

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["MeasuredProvenance", "EstimatedProvenance", "DerivedProvenance", "Provenance",
           "provenance_from_dict"]


@frozen_record
class MeasuredProvenance(FrozenRecord):
    """Numbers measured by running a model.

    ``model`` names the model (an import path or a description), ``data`` the inputs it saw,
    ``steps`` the total training steps the progress axis spans (``None`` when unknown),
    ``command`` the exact command line that regenerates the profile and ``date`` an ISO 8601
    date or timestamp.
    """

    model: str
    data: str
    steps: int | None
    command: str
    date: str
    seed: int | None = None
    notes: str | None = None
    software: Mapping[str, str] = field(default_factory=dict)

    kind = "measured"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``{"kind": "measured", ...}``); empty optional fields are left out."""
        out: dict[str, Any] = {"kind": self.kind, "model": self.model, "data": self.data,
                               "steps": self.steps, "command": self.command, "date": self.date}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.notes is not None:
            out["notes"] = self.notes
        if self.software:
            out["software"] = dict(self.software)
        return out


@frozen_record
class EstimatedProvenance(FrozenRecord):
    """Numbers estimated rather than measured; ``source`` says what the estimate rests on."""

    source: str
    notes: str | None = None

    kind = "estimated"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``{"kind": "estimated", "source": ...}``)."""
        out: dict[str, Any] = {"kind": self.kind, "source": self.source}
        if self.notes is not None:
            out["notes"] = self.notes
        return out


@frozen_record
class DerivedProvenance(FrozenRecord):
    """Numbers carried over from another (measured) profile by a stated rule.

    ``source`` names the profile the numbers come from and what it was measured on,
    ``method`` how its tensors map onto this network's, ``command`` the command line that
    regenerates this profile and ``date`` an ISO 8601 date.
    """

    source: str
    method: str
    command: str
    date: str
    notes: str | None = None

    kind = "derived"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``{"kind": "derived", ...}``)."""
        out: dict[str, Any] = {"kind": self.kind, "source": self.source, "method": self.method,
                               "command": self.command, "date": self.date}
        if self.notes is not None:
            out["notes"] = self.notes
        return out


Provenance = Union[MeasuredProvenance, EstimatedProvenance, DerivedProvenance]


def provenance_from_dict(data: Mapping[str, Any]) -> Provenance:
    """Build a provenance object from an already validated JSON dict."""
    fields = {k: v for k, v in data.items() if k != "kind"}
    kinds = {"measured": MeasuredProvenance, "estimated": EstimatedProvenance,
             "derived": DerivedProvenance}
    return kinds[data["kind"]](**fields)
