import pytest

from datekit import Date, DateError, add_days, day_of_year, days_between, days_in_month, is_leap_year, parse_date, weekday


def test_century_leap_rules():
    """1900 is not a leap year but 2000 is."""
    assert not is_leap_year(1900), "1900 is divisible by 100 but not 400"
    assert is_leap_year(2000), "2000 is divisible by 400"


def test_february_lengths():
    """February has 29 days in leap years and 28 otherwise."""
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2023, 2) == 28
    assert days_in_month(2023, 12) == 31


def test_month_out_of_range():
    """Month 13 and month 0 are rejected."""
    with pytest.raises(DateError):
        days_in_month(2023, 13)
    with pytest.raises(DateError):
        days_in_month(2023, 0)


def test_day_of_year():
    """Day-of-year counts from 1 and includes Feb 29 in leap years."""
    assert day_of_year(Date(2023, 1, 1)) == 1
    assert day_of_year(Date(2024, 3, 1)) == 61
    assert day_of_year(Date(2023, 12, 31)) == 365


def test_weekday_known_dates():
    """Known weekdays: 2024-01-01 was a Monday, 2000-02-29 a Tuesday."""
    assert weekday(Date(2024, 1, 1)) == 0
    assert weekday(Date(2000, 2, 29)) == 1
    assert weekday(Date(2023, 12, 31)) == 6


def test_ordinal_round_trip():
    """Converting to an ordinal and back gives the same date."""
    for d in [Date(1, 1, 1), Date(1999, 12, 31), Date(2024, 2, 29), Date(2100, 3, 1)]:
        assert Date.from_ordinal(d.ordinal()) == d


def test_add_days_across_year():
    """Adding days crosses month and year boundaries."""
    assert add_days(Date(2023, 12, 30), 3) == Date(2024, 1, 2)
    assert add_days(Date(2024, 3, 1), -1) == Date(2024, 2, 29)


def test_days_between():
    """days_between counts the days from the first date to the second."""
    assert days_between(Date(2024, 1, 1), Date(2024, 12, 31)) == 365
    assert days_between(Date(2024, 1, 10), Date(2024, 1, 1)) == -9


def test_parse_day_first():
    """Day-first dates with slashes parse as DD/MM/YYYY."""
    assert parse_date("05/11/2021") == Date(2021, 11, 5)


def test_parse_month_names():
    """Month names parse in any case and may be abbreviated."""
    assert parse_date("3 march 2022") == Date(2022, 3, 3)
    assert parse_date("14 Feb, 2020") == Date(2020, 2, 14)


def test_parse_rejects_garbage():
    """Unparseable text raises DateError, not another exception."""
    for bad in ["", "2024-13-01", "hello", "1 Ma 2020", "x/y/z"]:
        with pytest.raises(DateError):
            parse_date(bad)


def test_format_tokens():
    """format replaces YYYY, MM, DD, Month, Mon and Weekday."""
    d = Date(2024, 7, 4)
    assert d.format("DD Month YYYY") == "04 July 2024"
    assert d.format("Weekday, Mon DD") == "Thursday, Jul 04"


def test_dates_order():
    """Dates compare chronologically."""
    assert Date(2023, 12, 31) < Date(2024, 1, 1)
    assert sorted([Date(2024, 5, 1), Date(2023, 6, 1)])[0] == Date(2023, 6, 1)


def test_year_zero_rejected():
    """There is no year 0."""
    with pytest.raises(DateError):
        Date(0, 1, 1)
