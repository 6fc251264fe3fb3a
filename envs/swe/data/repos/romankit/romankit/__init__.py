"""romankit: Roman numerals, number words and ordinals."""

from romankit.numerals import from_roman, ordinal, to_roman, to_words

__all__ = ["from_roman", "ordinal", "to_roman", "to_words"]
