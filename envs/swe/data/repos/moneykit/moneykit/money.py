"""Money as (integer minor units, currency code)."""

from dataclasses import dataclass
from fractions import Fraction

# currency code -> (symbol, decimal places)
CURRENCIES = {"USD": ("$", 2), "EUR": ("€", 2), "JPY": ("¥", 0), "KWD": ("KD", 3)}


class CurrencyMismatch(ValueError):
    pass


def _round_half_even(x):
    floor = x.numerator // x.denominator
    rest = x - floor
    if rest > Fraction(1, 2):
        return floor + 1
    if rest < Fraction(1, 2):
        return floor
    return floor if floor % 2 == 0 else floor + 1


def _round_half_up(x):
    floor = x.numerator // x.denominator
    return floor + 1 if x - floor >= Fraction(1, 2) else floor


@dataclass(frozen=True, order=False)
class Money:
    minor: int
    currency: str = "USD"

    def __post_init__(self):
        if self.currency not in CURRENCIES:
            raise ValueError(f"unknown currency {self.currency!r}")

    @classmethod
    def of(cls, amount, currency="USD", rounding="half_even"):
        """From a decimal amount (str, int or Fraction), rounded to the currency's places."""
        places = CURRENCIES[currency][1]
        scaled = Fraction(amount) * 10 ** places
        rounder = _round_half_even if rounding == "half_even" else _round_half_up
        return cls(rounder(scaled), currency)

    @property
    def places(self):
        return CURRENCIES[self.currency][1]

    @property
    def amount(self):
        return Fraction(self.minor, 10 ** self.places)

    def _check(self, other):
        if not isinstance(other, Money):
            raise TypeError("can only combine Money with Money")
        if other.currency != self.currency:
            raise CurrencyMismatch(f"{self.currency} vs {other.currency}")

    def __add__(self, other):
        self._check(other)
        return Money(self.minor + other.minor, self.currency)

    def __sub__(self, other):
        self._check(other)
        return Money(self.minor - other.minor, self.currency)

    def __neg__(self):
        return Money(-self.minor, self.currency)

    def __lt__(self, other):
        self._check(other)
        return self.minor < other.minor

    def __le__(self, other):
        self._check(other)
        return self.minor <= other.minor

    def multiply(self, factor, rounding="half_even"):
        return Money.of(self.amount * Fraction(factor), self.currency, rounding)

    def allocate(self, ratios):
        """Split into parts proportional to `ratios`; leftover minor units go to the first
        parts, one each, so the parts always add up to the whole."""
        if not ratios or any(r < 0 for r in ratios) or sum(ratios) == 0:
            raise ValueError("ratios must be non-negative and not all zero")
        total = sum(ratios)
        parts = [self.minor * r // total for r in ratios]
        leftover = self.minor - sum(parts)
        for i in range(leftover):
            parts[i % len(parts)] += 1
        return [Money(p, self.currency) for p in parts]

    def format(self, symbol=True):
        sign = "-" if self.minor < 0 else ""
        units, cents = divmod(abs(self.minor), 10 ** self.places)
        text = f"{units:,}"
        if self.places > 0:
            text += "." + str(cents).zfill(self.places)
        prefix = CURRENCIES[self.currency][0] if symbol else ""
        suffix = "" if symbol else " " + self.currency
        return f"{sign}{prefix}{text}{suffix}"

    def __str__(self):
        return self.format()


def parse_money(text):
    """Parse '12.50 USD', 'USD 12.50' or '$12.50' (symbol form), with thousands commas."""
    text = text.strip()
    parts = text.split()
    if len(parts) == 2:
        a, b = parts
        code, number = (a, b) if a.upper() in CURRENCIES else (b, a)
        return Money.of(number.replace(",", ""), code.upper())
    for code, (symbol, _) in CURRENCIES.items():
        body = text.lstrip("-")
        if body.startswith(symbol):
            number = body[len(symbol):].replace(",", "")
            if text.startswith("-"):
                number = "-" + number
            return Money.of(number, code)
    raise ValueError(f"cannot parse money: {text!r}")
