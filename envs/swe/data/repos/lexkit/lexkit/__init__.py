"""lexkit: tokenize and evaluate arithmetic expressions."""

from lexkit.tokens import Token, TokenizeError, tokenize
from lexkit.evaluator import EvalError, evaluate

__all__ = ["Token", "TokenizeError", "tokenize", "EvalError", "evaluate"]
