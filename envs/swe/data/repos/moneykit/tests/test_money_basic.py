import pytest

from moneykit import CurrencyMismatch, Money


def test_of_two_places():
    """Money.of stores cents for USD."""
    assert Money.of("12.34").minor == 1234


def test_add_same_currency():
    """Amounts in one currency add up."""
    assert Money.of("1.10") + Money.of("2.20") == Money.of("3.30")


def test_mixed_currency_rejected():
    """Adding different currencies is an error."""
    with pytest.raises(CurrencyMismatch):
        Money.of("1", "USD") + Money.of("1", "EUR")
