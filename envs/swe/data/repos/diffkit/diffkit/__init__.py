"""diffkit: compute, print and apply line diffs."""

from diffkit.diff import PatchError, apply_ops, diff_ops, lcs_length, similarity, unified_diff

__all__ = ["PatchError", "apply_ops", "diff_ops", "lcs_length", "similarity", "unified_diff"]
