"""graphkit: graph search algorithms."""

from graphkit.graph import CycleError, Graph, NoPathError

__all__ = ["CycleError", "Graph", "NoPathError"]
