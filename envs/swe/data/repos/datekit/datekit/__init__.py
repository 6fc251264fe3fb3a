"""datekit: parse, check and shift calendar dates without the datetime module."""

from datekit.core import (
    Date,
    DateError,
    add_days,
    day_of_year,
    days_between,
    days_in_month,
    is_leap_year,
    parse_date,
    weekday,
)

__all__ = [
    "Date", "DateError", "add_days", "day_of_year", "days_between", "days_in_month",
    "is_leap_year", "parse_date", "weekday",
]
