"""The prefetch-ahead search of the backward pass walks each layer a bounded number of times
(issue #34: a 7,118-layer network took 120 s, the search walking back over every earlier layer
for each layer of a transformer, which has no CONV layer to stop it)."""
from __future__ import annotations

from types import SimpleNamespace

from workloads.vdnn import _Schedule


class CountingLayers(dict):
    """``anchored``, counting the layers the search looks at."""

    looked = 0

    def get(self, key, default=None):
        CountingLayers.looked += 1
        return super().get(key, default)


def schedule(kinds: list[str], anchored: dict[int, list[str]]) -> SimpleNamespace:
    return SimpleNamespace(per_tensor=False, infos=[SimpleNamespace(kind=k) for k in kinds],
                           prefetched=set(), anchored=CountingLayers(anchored), _skip={})


def walk(s: SimpleNamespace) -> list[int]:
    """The backward pass's searches, last layer first, prefetching what each one finds."""
    stops = []
    for here in range(len(s.infos) - 1, -1, -1):
        k = _Schedule._ahead_stop(s, here - 1)
        stops.append(k)
        s.prefetched.update(s.anchored.get(k, ()) if k >= 0 else ())
    return stops


def test_a_layer_without_conv_is_walked_a_bounded_number_of_times():
    for n in (1000, 4000):
        CountingLayers.looked = 0
        walk(schedule(["linear"] * n, {}))
        assert CountingLayers.looked <= 3 * n      # the old search: n * (n - 1) / 2 looks


def test_the_search_stops_where_it_did_before():
    """The first layer below with something left to prefetch, or a CONV layer; -1 past the
    first layer."""
    kinds = ["conv", "linear", "linear", "conv", "linear", "linear", "linear"]
    s = schedule(kinds, {1: ["a"], 5: ["b"]})
    assert walk(s) == [5, 3, 3, 1, 0, 0, -1]
