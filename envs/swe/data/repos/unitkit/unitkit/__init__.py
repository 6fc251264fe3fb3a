"""unitkit: convert between units of measure."""

from unitkit.units import UnitError, convert, human_bytes, parse_quantity

__all__ = ["UnitError", "convert", "human_bytes", "parse_quantity"]
