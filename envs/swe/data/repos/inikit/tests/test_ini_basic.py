import pytest

from inikit import ParseError, parse


def test_simple_section():
    """Keys are read from their section."""
    cfg = parse("[server]\nhost = example.org\n")
    assert cfg.get("server", "host") == "example.org"


def test_comments_ignored():
    """Lines starting with # or ; are comments."""
    cfg = parse("# hello\n[a]\n; note\nx = 1\n")
    assert cfg.section_names() == ["a"]


def test_key_outside_section():
    """A key before any section is a ParseError."""
    with pytest.raises(ParseError):
        parse("x = 1\n")
