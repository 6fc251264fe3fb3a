from wrapkit import fill, wrap


def test_wrap_simple():
    """Words wrap at the width."""
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_fill_joins_lines():
    """fill joins wrapped lines with newlines."""
    assert fill("aa bb cc", 5) == "aa bb\ncc"


def test_empty_text():
    """Empty text wraps to no lines."""
    assert wrap("   ", 10) == []
