import pytest

from romankit import from_roman, ordinal, to_roman, to_words


def test_subtractive_forms():
    """4, 9, 40, 90, 400, 900 use subtractive notation."""
    assert [to_roman(i) for i in (4, 9, 14, 40, 90, 400, 900)] == ["IV", "IX", "XIV", "XL", "XC", "CD", "CM"]


def test_large_numerals():
    """Years and the maximum value."""
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(2024) == "MMXXIV"
    assert to_roman(3999) == "MMMCMXCIX"


def test_out_of_range():
    """0, 4000 and non-integers are rejected."""
    for bad in (0, 4000, -1, 2.5):
        with pytest.raises(ValueError):
            to_roman(bad)


def test_round_trip_all():
    """Every number 1..3999 survives a round trip."""
    assert all(from_roman(to_roman(i)) == i for i in range(1, 4000))


def test_parse_lowercase_and_subtractive():
    """Lower case and subtractive pairs parse."""
    assert from_roman("mcmxciv") == 1994
    assert from_roman(" XLII ") == 42


def test_non_canonical_rejected():
    """IIII, VX, IC and junk are not canonical numerals."""
    for bad in ["IIII", "VX", "IC", "", "ABC", "MMMM"]:
        with pytest.raises(ValueError):
            from_roman(bad)


def test_words_small():
    """Numbers below one hundred."""
    assert to_words(0) == "zero"
    assert to_words(13) == "thirteen"
    assert to_words(20) == "twenty"
    assert to_words(42) == "forty-two"
    assert to_words(99) == "ninety-nine"


def test_words_hundreds():
    """Hundreds use 'and' before the rest."""
    assert to_words(100) == "one hundred"
    assert to_words(105) == "one hundred and five"
    assert to_words(999) == "nine hundred and ninety-nine"


def test_words_scales():
    """Thousands and millions."""
    assert to_words(1000) == "one thousand"
    assert to_words(1005) == "one thousand and five"
    assert to_words(2345) == "two thousand three hundred and forty-five"
    assert to_words(7000001) == "seven million and one"
    assert to_words(-12) == "minus twelve"


def test_ordinal_teens_and_larger():
    """11th-13th are exceptions; 21st, 102nd, 111th follow the rules."""
    assert [ordinal(i) for i in (11, 12, 13, 21, 22, 23, 102, 111, 1000)] == [
        "11th", "12th", "13th", "21st", "22nd", "23rd", "102nd", "111th", "1000th"]
