"""Parallel training arithmetic and plans on the workload floor (ranks, groups, sharding)."""
