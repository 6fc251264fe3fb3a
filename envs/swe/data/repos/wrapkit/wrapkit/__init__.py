"""wrapkit: wrap, justify, center and shorten text."""

from wrapkit.layout import center, fill, indent, justify, shorten, wrap

__all__ = ["center", "fill", "indent", "justify", "shorten", "wrap"]
