"""Which resource bounded the cDMA engine's copies: of every copy's time on its flows, how much
each of the three kinds of resource a copy crosses held it to — the engine's codec units
(``engine``), the host link and any link beyond it (``link``), and the GPU's DRAM (``HBM``).

A flow alone on its resources moves at the rate of its tightest one (capacity / weight: a
tensor compressed 4x loads the link with a quarter of its raw bytes, the codec and HBM with all
of them), so its isolated time is that resource's. Time beyond that is time other flows took
from it at a shared resource, which the flow network charges to that resource (``Flow.lost``).
So every picosecond of a copy's flow is the bound of exactly one resource. In chunk mode each
burst of both stages is a flow of its own, and the bursts' times are added up the same way.
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["BOUNDS", "CopyBounds"]

#: the kinds of resource a copy crosses, in the order the console names them
BOUNDS = ("engine", "link", "HBM")


class CopyBounds:
    """Picoseconds of the engine's copies bounded by each kind of resource (:data:`BOUNDS`).
    ``kinds`` names the kind of the resources that are not links (the codec's and the DRAM's
    resource names); any other resource on a copy's way is a link."""

    def __init__(self, kinds: Mapping[str, str]) -> None:
        self.kinds = dict(kinds)
        self.ps = {kind: 0.0 for kind in BOUNDS}
        #: resource -> ps the copies lost there to other flows (their time beyond isolated)
        self.lost_at: dict[str, float] = {}

    def kind(self, resource: str) -> str:
        """The kind of ``resource``: ``engine``, ``HBM`` or ``link``."""
        return self.kinds.get(resource, "link")

    def add(self, flow: Any) -> None:
        """Charge a finished flow: the time it lost at each resource to that resource, its
        isolated time to the resource that sets its rate alone."""
        lost = dict(flow.lost or {})
        for name, ps in lost.items():
            self.lost_at[name] = self.lost_at.get(name, 0.0) + ps
        pairs = flow.route.pairs
        if pairs and flow.amount > 0:
            tightest = min(pairs, key=lambda pair: pair[0].capacity / pair[1])[0]
            lost[tightest.name] = lost.get(tightest.name, 0.0) + \
                flow.route.alone_ps(flow.amount)
        for name, ps in lost.items():
            self.ps[self.kind(name)] += ps

    def shares(self) -> dict[str, float]:
        """Each kind's share of the copies' time (all zero when nothing was copied)."""
        total = sum(self.ps.values())
        return {kind: (ps / total if total else 0.0) for kind, ps in self.ps.items()}
