import pytest

from lexkit import EvalError, evaluate, tokenize


def test_tokenize_kinds():
    """Numbers, names, operators and parentheses become tokens of their kind."""
    kinds = [t.kind for t in tokenize("(x + 12)")]
    assert kinds == ["LPAREN", "NAME", "OP", "NUMBER", "RPAREN"]


def test_add_and_multiply():
    """Multiplication binds tighter than addition."""
    assert evaluate("2 + 3 * 4") == 14


def test_parentheses():
    """Parentheses group."""
    assert evaluate("(2 + 3) * 4") == 20


def test_unknown_variable():
    """An unknown variable is an EvalError."""
    with pytest.raises(EvalError):
        evaluate("y + 1")
