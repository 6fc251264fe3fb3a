import pytest

from moneykit import Money, parse_money


def test_zero_and_three_place_currencies():
    """JPY has no minor units; KWD has three places."""
    assert Money.of("1234", "JPY").minor == 1234
    assert Money.of("1.5", "KWD").minor == 1500


def test_bankers_rounding():
    """Half-even rounding sends halves to the even cent."""
    assert Money.of("0.125").minor == 12
    assert Money.of("0.135").minor == 14
    assert Money.of("0.126").minor == 13


def test_half_up_rounding():
    """Half-up rounding sends halves up."""
    assert Money.of("0.125", rounding="half_up").minor == 13
    assert Money.of("0.124", rounding="half_up").minor == 12


def test_subtract_and_negate():
    """Subtraction and negation."""
    assert Money.of("5") - Money.of("7.5") == Money.of("-2.5")
    assert -Money.of("3") == Money.of("-3")


def test_comparisons():
    """Money compares by amount."""
    assert Money.of("1.99") < Money.of("2")
    assert Money.of("2") <= Money.of("2")
    assert not Money.of("3") < Money.of("2")


def test_multiply_rounds():
    """multiply rounds the product to the currency's places."""
    assert Money.of("10.00").multiply("0.075") == Money.of("0.75")
    assert Money.of("1.00").multiply(3) == Money.of("3")


def test_allocate_even_and_leftover():
    """allocate splits by ratios and hands leftover cents to the first parts."""
    parts = Money.of("1.00").allocate([1, 1, 1])
    assert [p.minor for p in parts] == [34, 33, 33]
    parts = Money.of("0.05").allocate([3, 7])
    assert [p.minor for p in parts] == [2, 3]
    assert sum(p.minor for p in Money.of("100").allocate([1, 2, 3, 4])) == 10000


def test_allocate_bad_ratios():
    """Empty, negative or all-zero ratios are rejected."""
    for bad in [[], [0, 0], [1, -1]]:
        with pytest.raises(ValueError):
            Money.of("1").allocate(bad)


def test_format():
    """format adds the symbol, thousands separators and the right places."""
    assert Money.of("1234567.5").format() == "$1,234,567.50"
    assert Money.of("-0.05").format() == "-$0.05"
    assert Money.of("1000", "JPY").format() == "¥1,000"
    assert Money.of("2.5", "EUR").format(symbol=False) == "2.50 EUR"


def test_parse_money():
    """parse_money reads code-first, code-last and symbol forms."""
    assert parse_money("12.50 USD") == Money.of("12.5")
    assert parse_money("EUR 3") == Money.of("3", "EUR")
    assert parse_money("$1,200.99") == Money.of("1200.99")
    assert parse_money("-$4.20") == Money.of("-4.2")


def test_unknown_currency():
    """Unknown currencies and unparsable text are rejected."""
    with pytest.raises(ValueError):
        Money(1, "XYZ")
    with pytest.raises(ValueError):
        parse_money("12 apples please")
