import pytest

from inikit import ParseError, parse


def test_colon_separator():
    """key: value works like key = value."""
    assert parse("[a]\nname: Ada\n").get("a", "name") == "Ada"


def test_value_may_contain_separator():
    """Only the first separator splits key from value."""
    cfg = parse("[a]\nurl = http://x.org/?q=1\n")
    assert cfg.get("a", "url") == "http://x.org/?q=1"


def test_keys_are_case_insensitive():
    """Keys are lower-cased."""
    assert parse("[a]\nName = x\n").get("a", "name") == "x"


def test_default_section_fallback():
    """Keys missing in a section come from [DEFAULT]."""
    cfg = parse("[DEFAULT]\ntimeout = 30\n[db]\nhost = h\n")
    assert cfg.get("db", "timeout") == "30"
    assert cfg.section_names() == ["db"]


def test_continuation_lines():
    """Indented lines continue the previous value."""
    cfg = parse("[a]\ntext = first\n  second\n  third\n")
    assert cfg.get("a", "text") == "first\nsecond\nthird"


def test_typed_getters():
    """get_int, get_bool and get_list convert values."""
    cfg = parse("[a]\nn = 42\nflag = Yes\noff = off\nitems = a, b,, c\n")
    assert cfg.get_int("a", "n") == 42
    assert cfg.get_bool("a", "flag") is True
    assert cfg.get_bool("a", "off") is False
    assert cfg.get_list("a", "items") == ["a", "b", "c"]


def test_bad_bool():
    """A word that is not a boolean raises ValueError."""
    with pytest.raises(ValueError):
        parse("[a]\nflag = maybe\n").get_bool("a", "flag")


def test_interpolation():
    """${key} and ${section:key} are replaced, recursively."""
    cfg = parse("[paths]\nroot = /srv\ndata = ${root}/data\n[app]\nlog = ${paths:data}/log\n")
    assert cfg.get("app", "log") == "/srv/data/log"


def test_interpolation_cycle():
    """A reference cycle is an error rather than a hang."""
    cfg = parse("[a]\nx = ${y}\ny = ${x}\n")
    with pytest.raises(ValueError):
        cfg.get("a", "x")


def test_fallback_and_missing():
    """fallback is returned for a missing key; without one KeyError is raised."""
    cfg = parse("[a]\nx = 1\n")
    assert cfg.get("a", "nope", fallback="d") == "d"
    with pytest.raises(KeyError):
        cfg.get("a", "nope")
    with pytest.raises(KeyError):
        cfg.get("missing", "x")


def test_parse_errors_report_line():
    """Parse errors say which line is wrong."""
    with pytest.raises(ParseError) as info:
        parse("[a]\nx = 1\n[broken\n")
    assert info.value.line == 3
    with pytest.raises(ParseError):
        parse("[a]\njust words\n")
    with pytest.raises(ParseError):
        parse("[]\n")


def test_round_trip():
    """dumps writes text that parses back to the same values."""
    cfg = parse("[a]\nx = 1\ntext = one\n  two\n[b]\ny = 2\n")
    cfg.set("b", "Z", 3)
    again = parse(cfg.dumps())
    assert again.get("a", "text") == "one\ntwo"
    assert again.get("b", "z") == "3"
    assert again.section_names() == ["a", "b"]
