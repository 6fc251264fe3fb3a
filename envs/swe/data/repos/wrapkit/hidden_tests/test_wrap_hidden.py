import pytest

from wrapkit import center, indent, justify, shorten, wrap


def test_exact_fit():
    """A line of exactly `width` characters stays on one line."""
    assert wrap("abcd efgh", 9) == ["abcd efgh"]
    assert wrap("abcd efgh", 8) == ["abcd", "efgh"]


def test_lines_never_exceed_width():
    """No wrapped line is longer than the width."""
    text = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod"
    for width in range(5, 30):
        assert all(len(line) <= width for line in wrap(text, width))


def test_long_words_broken():
    """Words longer than the width are broken into pieces."""
    assert wrap("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert wrap("x abcdefgh", 4, break_long_words=False) == ["x", "abcdefgh"]


def test_bad_width():
    """A width below one is an error."""
    with pytest.raises(ValueError):
        wrap("a", 0)


def test_justify():
    """Justified lines are exactly `width` wide except the last."""
    lines = justify("This is an example of text justification.", 16)
    assert lines == ["This    is    an", "example  of text", "justification."]


def test_justify_extra_spaces_go_left():
    """Leftover spaces go to the leftmost gaps."""
    assert justify("a b c dddd", 7) == ["a  b  c", "dddd"]
    assert justify("aa b c dd", 8)[0] == "aa  b  c"


def test_center():
    """center pads both sides; an odd space goes right."""
    assert center("ab", 6) == "  ab  "
    assert center("ab", 5, "*") == "*ab**"
    assert center("toolong", 3) == "toolong"


def test_center_bad_fill():
    """fillchar must be one character."""
    with pytest.raises(ValueError):
        center("a", 5, "--")


def test_indent():
    """indent prefixes non-blank lines; first_prefix applies to the first line."""
    assert indent("a\n\nb", "> ") == "> a\n\n> b"
    assert indent("a\nb", "   ", first_prefix="1. ") == "1. a\n   b"


def test_shorten():
    """shorten cuts at a word boundary and adds the placeholder."""
    assert shorten("Hello  world!", 12) == "Hello world!"
    assert shorten("Hello world, how are you", 18) == "Hello world, [...]"
    assert shorten("Hello world, how are you", 17) == "Hello [...]"
    assert shorten("Supercalifragilistic", 8) == "[...]"
