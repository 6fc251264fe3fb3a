import pytest

from datekit import Date, DateError, is_leap_year, parse_date


def test_parse_iso():
    """ISO dates parse into year, month, day."""
    assert parse_date("2024-03-15") == Date(2024, 3, 15)


def test_leap_years():
    """Leap years follow the Gregorian rules."""
    assert is_leap_year(2024)
    assert not is_leap_year(2023)


def test_isoformat_pads():
    """isoformat pads month and day with zeros."""
    assert Date(2024, 1, 5).isoformat() == "2024-01-05"


def test_invalid_day_rejected():
    """A day past the end of the month is an error."""
    with pytest.raises(DateError):
        Date(2023, 4, 31)
