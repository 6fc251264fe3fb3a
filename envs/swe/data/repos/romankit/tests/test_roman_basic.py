from romankit import from_roman, ordinal, to_roman


def test_small_numerals():
    """Small numbers convert to Roman numerals."""
    assert [to_roman(i) for i in (1, 2, 3, 5, 10)] == ["I", "II", "III", "V", "X"]


def test_parse_simple():
    """Simple numerals parse back."""
    assert from_roman("XII") == 12


def test_ordinal_basic():
    """1st, 2nd, 3rd, 4th."""
    assert [ordinal(i) for i in (1, 2, 3, 4)] == ["1st", "2nd", "3rd", "4th"]
