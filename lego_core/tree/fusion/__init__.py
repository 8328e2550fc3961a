"""Fusion: what may fuse (policy) and the grouping of graph nodes (mechanism)."""
