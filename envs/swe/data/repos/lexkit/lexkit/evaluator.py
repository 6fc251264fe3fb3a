"""Precedence climbing over the token list.

Precedence: + - (1) < * / % (2) < unary minus (3) < ** (4, right-associative).
"""

from lexkit.tokens import tokenize

BINARY_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "**": 4}
RIGHT_ASSOCIATIVE = {"**"}
UNARY_PRECEDENCE = 3


class EvalError(ValueError):
    pass


class _Parser:
    def __init__(self, tokens, variables):
        self.tokens = tokens
        self.pos = 0
        self.variables = variables

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def advance(self):
        token = self.peek()
        if token is None:
            raise EvalError("unexpected end of expression")
        self.pos += 1
        return token

    def expression(self, min_precedence=1):
        left = self.unary()
        while True:
            token = self.peek()
            if token is None or token.kind != "OP":
                return left
            prec = BINARY_PRECEDENCE[token.text]
            if prec < min_precedence:
                return left
            self.advance()
            next_min = prec if token.text in RIGHT_ASSOCIATIVE else prec + 1
            right = self.expression(next_min)
            left = apply(token.text, left, right)

    def unary(self):
        token = self.peek()
        if token is not None and token.kind == "OP" and token.text == "-":
            self.advance()
            return -self.expression(UNARY_PRECEDENCE)
        if token is not None and token.kind == "OP" and token.text == "+":
            self.advance()
            return self.expression(UNARY_PRECEDENCE)
        return self.atom()

    def atom(self):
        token = self.advance()
        if token.kind == "NUMBER":
            return float(token.text) if "." in token.text else int(token.text)
        if token.kind == "NAME":
            if token.text not in self.variables:
                raise EvalError(f"unknown variable {token.text!r}")
            return self.variables[token.text]
        if token.kind == "LPAREN":
            value = self.expression()
            closing = self.advance()
            if closing.kind != "RPAREN":
                raise EvalError(f"expected ')' at {closing.position}")
            return value
        raise EvalError(f"unexpected {token.text!r} at {token.position}")


def apply(op, left, right):
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "/":
        if right == 0:
            raise EvalError("division by zero")
        return left / right
    if op == "%":
        if right == 0:
            raise EvalError("modulo by zero")
        return left % right
    if op == "**":
        return left ** right
    raise EvalError(f"unknown operator {op!r}")


def evaluate(source, variables=None):
    tokens = tokenize(source)
    if not tokens:
        raise EvalError("empty expression")
    parser = _Parser(tokens, dict(variables or {}))
    value = parser.expression()
    if parser.peek() is not None:
        extra = parser.peek()
        raise EvalError(f"unexpected {extra.text!r} at {extra.position}")
    return value
