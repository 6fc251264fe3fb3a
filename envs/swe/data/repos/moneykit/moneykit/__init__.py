"""moneykit: exact money arithmetic in minor units."""

from moneykit.money import CURRENCIES, CurrencyMismatch, Money, parse_money

__all__ = ["CURRENCIES", "CurrencyMismatch", "Money", "parse_money"]
