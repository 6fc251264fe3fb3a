import pytest

from unitkit import UnitError, convert, human_bytes, parse_quantity


def test_imperial_lengths():
    """Miles, feet and inches."""
    assert convert(1, "mi", "ft") == pytest.approx(5280)
    assert convert(12, "in", "ft") == pytest.approx(1)
    assert convert(100, "cm", "in") == pytest.approx(39.3700787)


def test_mass():
    """Pounds, ounces and kilograms."""
    assert convert(1, "lb", "oz") == pytest.approx(16)
    assert convert(2.5, "kg", "g") == pytest.approx(2500)
    assert convert(1000, "mg", "g") == pytest.approx(1)


def test_time():
    """Days, hours and minutes."""
    assert convert(1.5, "h", "min") == pytest.approx(90)
    assert convert(2, "day", "h") == pytest.approx(48)


def test_temperatures():
    """Celsius, Fahrenheit and Kelvin."""
    assert convert(100, "C", "F") == pytest.approx(212)
    assert convert(32, "F", "C") == pytest.approx(0)
    assert convert(0, "K", "C") == pytest.approx(-273.15)
    assert convert(-40, "celsius", "fahrenheit") == pytest.approx(-40)


def test_below_absolute_zero():
    """Temperatures below 0 K are rejected."""
    with pytest.raises(UnitError):
        convert(-300, "C", "K")


def test_temperature_vs_length():
    """Temperature cannot become length."""
    with pytest.raises(UnitError):
        convert(1, "C", "m")


def test_aliases_and_unknown():
    """Aliases are accepted; unknown units are not."""
    assert convert(3, "hours", "seconds") == pytest.approx(10800)
    with pytest.raises(UnitError):
        convert(1, "parsec", "m")


def test_data_units():
    """Decimal and binary data units."""
    assert convert(1, "MiB", "KiB") == pytest.approx(1024)
    assert convert(1, "MB", "KB") == pytest.approx(1000)


def test_parse_quantity():
    """Quantities parse with or without a space, with exponents."""
    assert parse_quantity("3.5 km") == (3.5, "km")
    assert parse_quantity("12kg") == (12.0, "kg")
    assert parse_quantity("-4 C") == (-4.0, "C")
    assert parse_quantity("1e3 m") == (1000.0, "m")
    for bad in ["km", "12", "abc m", "3 lightyears"]:
        with pytest.raises(UnitError):
            parse_quantity(bad)


def test_human_bytes():
    """human_bytes uses binary prefixes."""
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1024) == "1.0 KiB"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(5 * 1024 ** 3, precision=2) == "5.00 GiB"
    with pytest.raises(UnitError):
        human_bytes(-1)
