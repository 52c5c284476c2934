"""The sweep spec the executor tests run (``tests/sweep``): the counting topology over six
points, with a param and two statistics; ``{script}`` is the topology's path."""
from __future__ import annotations

__all__ = ["COUNTING_SPEC"]

COUNTING_SPEC = """
name: counting
topology: {script}
options: {value: 0.5}
grid:
  n: [1, 2, 3]
  mode: [a, b]
params:
  probe: {seed: [5]}
statistics: [values_u32.Count, "probe:values_u64.Max"]
"""
