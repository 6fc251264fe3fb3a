"""Turn source text into NUMBER, NAME, OP, LPAREN and RPAREN tokens."""

from dataclasses import dataclass

OPERATORS = ("**", "+", "-", "*", "/", "%")


class TokenizeError(ValueError):
    pass


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    position: int


def tokenize(source):
    tokens = []
    i = 0
    while i < len(source):
        ch = source[i]
        if ch.isspace():
            i += 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < len(source) and source[i + 1].isdigit()):
            start = i
            seen_dot = False
            while i < len(source) and (source[i].isdigit() or source[i] == "."):
                if source[i] == ".":
                    if seen_dot:
                        raise TokenizeError(f"second decimal point at {i}")
                    seen_dot = True
                i += 1
            tokens.append(Token("NUMBER", source[start:i], start))
            continue
        if ch.isalpha() or ch == "_":
            start = i
            while i < len(source) and (source[i].isalnum() or source[i] == "_"):
                i += 1
            tokens.append(Token("NAME", source[start:i], start))
            continue
        if ch == "(":
            tokens.append(Token("LPAREN", ch, i))
            i += 1
            continue
        if ch == ")":
            tokens.append(Token("RPAREN", ch, i))
            i += 1
            continue
        for op in OPERATORS:
            if source.startswith(op, i):
                tokens.append(Token("OP", op, i))
                i += len(op)
                break
        else:
            raise TokenizeError(f"unexpected character {ch!r} at {i}")
    return tokens
