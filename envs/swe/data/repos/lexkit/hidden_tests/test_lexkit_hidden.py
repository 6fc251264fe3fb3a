import pytest

from lexkit import EvalError, TokenizeError, evaluate, tokenize


def test_token_positions():
    """Each token records where it starts."""
    assert [t.position for t in tokenize("ab + 7")] == [0, 3, 5]


def test_power_operator_is_one_token():
    """'**' is a single operator token."""
    assert [t.text for t in tokenize("2**3")] == ["2", "**", "3"]


def test_decimal_numbers():
    """Decimal numbers, including a leading dot, evaluate as floats."""
    assert evaluate("1.5 * 2") == 3.0
    assert evaluate(".5 + .25") == 0.75


def test_two_decimal_points_rejected():
    """A number with two decimal points does not tokenize."""
    with pytest.raises(TokenizeError):
        tokenize("1.2.3")


def test_bad_character():
    """Unknown characters are rejected with their position."""
    with pytest.raises(TokenizeError, match="at 2"):
        tokenize("1 $ 2")


def test_subtraction_is_left_associative():
    """10 - 4 - 3 is (10 - 4) - 3."""
    assert evaluate("10 - 4 - 3") == 3


def test_division_left_associative():
    """100 / 10 / 5 is 2."""
    assert evaluate("100 / 10 / 5") == 2


def test_power_is_right_associative():
    """2 ** 3 ** 2 is 2 ** 9."""
    assert evaluate("2 ** 3 ** 2") == 512


def test_unary_minus():
    """Unary minus binds tighter than * but looser than **."""
    assert evaluate("-3 * 2") == -6
    assert evaluate("-2 ** 2") == -4
    assert evaluate("4 - -1") == 5


def test_modulo():
    """% is the remainder."""
    assert evaluate("17 % 5") == 2


def test_variables():
    """Variables are looked up in the mapping given."""
    assert evaluate("rate * hours + bonus", {"rate": 20, "hours": 3, "bonus": 5}) == 65


def test_division_by_zero():
    """Division and modulo by zero raise EvalError."""
    with pytest.raises(EvalError):
        evaluate("1 / 0")
    with pytest.raises(EvalError):
        evaluate("1 % 0")


def test_unbalanced_parentheses():
    """Missing or extra parentheses are errors."""
    with pytest.raises(EvalError):
        evaluate("(1 + 2")
    with pytest.raises(EvalError):
        evaluate("1 + 2)")


def test_empty_expression():
    """An empty expression is an EvalError."""
    with pytest.raises(EvalError):
        evaluate("   ")


def test_unary_plus_and_nested():
    """Unary plus and nested parentheses."""
    assert evaluate("+((2))") == 2
    assert evaluate("2 * (3 + (4 - 1)) / 3") == 4
