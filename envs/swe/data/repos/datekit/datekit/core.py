"""Proleptic Gregorian calendar arithmetic on (year, month, day) triples."""

from dataclasses import dataclass

MONTH_NAMES = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]
WEEKDAY_NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
DAYS_PER_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


class DateError(ValueError):
    pass


def is_leap_year(year):
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_month(year, month):
    if not 1 <= month <= 12:
        raise DateError(f"month out of range: {month}")
    if month == 2 and is_leap_year(year):
        return 29
    return DAYS_PER_MONTH[month - 1]


@dataclass(frozen=True, order=True)
class Date:
    year: int
    month: int
    day: int

    def __post_init__(self):
        if self.year < 1:
            raise DateError(f"year out of range: {self.year}")
        if not 1 <= self.day <= days_in_month(self.year, self.month):
            raise DateError(f"day out of range: {self.day}")

    def isoformat(self):
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"

    def format(self, pattern):
        """Format with tokens YYYY, MM, DD, Month, Mon and Weekday."""
        out = pattern.replace("YYYY", f"{self.year:04d}")
        out = out.replace("MM", f"{self.month:02d}").replace("DD", f"{self.day:02d}")
        out = out.replace("Weekday", WEEKDAY_NAMES[weekday(self)])
        out = out.replace("Month", MONTH_NAMES[self.month - 1])
        return out.replace("Mon", MONTH_NAMES[self.month - 1][:3])

    def ordinal(self):
        """Days since 0001-01-01, which is ordinal 1."""
        y = self.year - 1
        days = y * 365 + y // 4 - y // 100 + y // 400
        return days + day_of_year(self)

    @classmethod
    def from_ordinal(cls, n):
        if n < 1:
            raise DateError(f"ordinal out of range: {n}")
        year = max(1, (n * 400) // 146097)
        while Date(year + 1, 1, 1).ordinal() <= n:
            year += 1
        while Date(year, 1, 1).ordinal() > n:
            year -= 1
        remaining = n - Date(year, 1, 1).ordinal() + 1
        month = 1
        while remaining > days_in_month(year, month):
            remaining -= days_in_month(year, month)
            month += 1
        return cls(year, month, remaining)


def day_of_year(date):
    total = date.day
    for m in range(1, date.month):
        total += days_in_month(date.year, m)
    return total


def weekday(date):
    """0 for Monday ... 6 for Sunday; 0001-01-01 was a Monday."""
    return (date.ordinal() - 1) % 7


def add_days(date, n):
    return Date.from_ordinal(date.ordinal() + n)


def days_between(a, b):
    return b.ordinal() - a.ordinal()


def parse_date(text):
    """Parse 'YYYY-MM-DD', 'DD/MM/YYYY' or 'D Month YYYY' (month name, any case, 3+ letters)."""
    text = text.strip()
    if not text:
        raise DateError("empty date")
    try:
        if "-" in text:
            y, m, d = text.split("-")
            return Date(int(y), int(m), int(d))
        if "/" in text:
            d, m, y = text.split("/")
            return Date(int(y), int(m), int(d))
        parts = text.replace(",", " ").split()
        if len(parts) == 3:
            d, name, y = parts
            return Date(int(y), _month_from_name(name), int(d))
    except ValueError as exc:
        if isinstance(exc, DateError):
            raise
        raise DateError(f"cannot parse date: {text!r}") from None
    raise DateError(f"cannot parse date: {text!r}")


def _month_from_name(name):
    key = name.lower()
    if len(key) < 3:
        raise DateError(f"month name too short: {name!r}")
    for i, full in enumerate(MONTH_NAMES):
        if full.lower().startswith(key):
            return i + 1
    raise DateError(f"unknown month: {name!r}")
