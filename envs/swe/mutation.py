"""Bug injection: find mutation sites with `ast`, apply them as exact one-line text edits.

Operators (the bug kinds of SWE-style mutation studies):
  binop_swap      a + b -> a - b, * -> /, // -> /, % -> //, ** -> *
  compare_swap    < -> <=, > -> >=, == -> !=, in -> not in, is -> is not (and back)
  boolop_swap     and <-> or
  augassign_swap  += <-> -=
  off_by_one      integer constant n -> n + 1 or n - 1
  wrong_constant  True <-> False, float x -> 10x
  removed_line    a simple statement replaced by `pass`
  swapped_args    f(a, b, ...) -> f(b, a, ...)
  negated_condition  if/while/ternary condition c -> not (c); `not c` -> c

Every mutation edits a single line, so the fix is a one-line change that an agent (and the
oracle, through str_replace) can make. Whether a mutation is a *task* is decided by running the
tests (taskgen.py): equivalent mutants are dropped there.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass

BINOP = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
              ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
CMPOP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
         ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
AUG_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add}
REMOVABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise,
             ast.Break, ast.Continue, ast.Delete)
OPERATORS = ("binop_swap", "compare_swap", "boolop_swap", "augassign_swap", "off_by_one",
             "wrong_constant", "removed_line", "swapped_args", "negated_condition")


@dataclass(frozen=True)
class Mutation:
    file: str
    line: int  # 1-based
    operator: str
    original: str  # the whole original line
    mutated: str  # the whole mutated line

    def to_dict(self) -> dict:
        return asdict(self)


class _Sites(ast.NodeVisitor):
    """Collects (line, byte_start, byte_end, replacement, operator) edits."""

    def __init__(self, lines: list[bytes]):
        self.lines = lines
        self.edits: list[tuple[int, int, int, str, str]] = []
        self.skip_constants: set[int] = set()

    # --- helpers ---------------------------------------------------------------------------
    def _single_line(self, node) -> bool:
        return getattr(node, "lineno", None) is not None and node.lineno == node.end_lineno

    def _text(self, node) -> str:
        return self.lines[node.lineno - 1][node.col_offset:node.end_col_offset].decode()

    def _gap_edit(self, left, right, old: str, new: str, operator: str) -> None:
        """Replace the operator token that sits between two operands on one line."""
        if not (self._single_line(left) and self._single_line(right) and left.end_lineno == right.lineno):
            return
        line = self.lines[left.end_lineno - 1]
        gap = line[left.end_col_offset:right.col_offset].decode()
        if gap.strip(" ()") != old:
            return
        start = left.end_col_offset + len(gap.encode()) - len(gap.lstrip(" (").encode())
        start = left.end_col_offset + gap.index(old)
        self.edits.append((left.end_lineno, start, start + len(old.encode()), new, operator))

    # --- visitors --------------------------------------------------------------------------
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self._maybe_remove(node)
        self.generic_visit(node)

    def visit_JoinedStr(self, node):
        return  # f-string internals have unreliable positions; leave them alone

    def visit_BinOp(self, node):
        swap = BINOP_SWAP.get(type(node.op))
        if swap:
            self._gap_edit(node.left, node.right, BINOP[type(node.op)], BINOP[swap], "binop_swap")
        self.generic_visit(node)

    def visit_Compare(self, node):
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            swap = CMP_SWAP.get(type(op))
            if swap:
                self._gap_edit(operands[i], operands[i + 1], CMPOP[type(op)], CMPOP[swap], "compare_swap")
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        for a, b in zip(node.values, node.values[1:]):
            self._gap_edit(a, b, old, new, "boolop_swap")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        swap = AUG_SWAP.get(type(node.op))
        if swap:
            self._gap_edit(node.target, node.value, BINOP[type(node.op)] + "=", BINOP[swap] + "=", "augassign_swap")
        self._maybe_remove(node)
        self.generic_visit(node)

    def visit_Constant(self, node):
        if not self._single_line(node) or id(node) in self.skip_constants:
            return
        v = node.value
        edit = lambda text, op: self.edits.append((node.lineno, node.col_offset, node.end_col_offset, text, op))  # noqa: E731
        if isinstance(v, bool):
            edit(str(not v), "wrong_constant")
        elif isinstance(v, int):
            edit(str(v + 1), "off_by_one")
            if v > 0:
                edit(str(v - 1), "off_by_one")
        elif isinstance(v, float) and v != 0:
            edit(repr(v * 10), "wrong_constant")

    def visit_Call(self, node):
        args = node.args
        if (len(args) >= 2 and not any(isinstance(a, ast.Starred) for a in args[:2])
                and all(self._single_line(a) for a in args[:2]) and args[0].lineno == args[1].lineno):
            a, b = args[0], args[1]
            ta, tb = self._text(a), self._text(b)
            if ta != tb:
                line = self.lines[a.lineno - 1]
                middle = line[a.end_col_offset:b.col_offset].decode()
                self.edits.append((a.lineno, a.col_offset, b.end_col_offset, tb + middle + ta, "swapped_args"))
        self.generic_visit(node)

    def _negate(self, test):
        if not self._single_line(test):
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self.edits.append((test.lineno, test.col_offset, test.end_col_offset, self._text(test.operand),
                               "negated_condition"))
        else:
            self.edits.append((test.lineno, test.col_offset, test.end_col_offset, f"not ({self._text(test)})",
                               "negated_condition"))

    def visit_If(self, node):
        self._negate(node.test)
        self.generic_visit(node)

    def visit_While(self, node):
        self._negate(node.test)
        self.generic_visit(node)

    def visit_IfExp(self, node):
        self._negate(node.test)
        self.generic_visit(node)

    def visit_Assign(self, node):
        self._maybe_remove(node)
        self.generic_visit(node)

    def visit_Return(self, node):
        self._maybe_remove(node)
        self.generic_visit(node)

    def visit_Raise(self, node):
        self._maybe_remove(node)
        self.generic_visit(node)

    def visit_Continue(self, node):
        self._maybe_remove(node)

    def visit_Break(self, node):
        self._maybe_remove(node)

    def _maybe_remove(self, node):
        if not isinstance(node, REMOVABLE) or not self._single_line(node):
            return
        line = self.lines[node.lineno - 1]
        if line[node.col_offset:].decode().strip() != self._text(node).strip():
            return  # something else shares the line (`x = 1; y = 2`, trailing comment is fine too)
        if line[:node.col_offset].strip():
            return  # e.g. `if x: return` on one line
        self.edits.append((node.lineno, node.col_offset, len(line), "pass", "removed_line"))


def find_mutations(source: str, file: str) -> list[Mutation]:
    """Every single-line mutation of `source`, each still valid Python, without duplicates."""
    tree = ast.parse(source)
    raw_lines = source.split("\n")
    lines = [ln.encode() for ln in raw_lines]
    sites = _Sites(lines)
    sites.visit(tree)
    out: list[Mutation] = []
    seen: set[tuple[int, str]] = set()
    for lineno, start, end, repl, operator in sites.edits:
        original = raw_lines[lineno - 1]
        mutated = (lines[lineno - 1][:start] + repl.encode() + lines[lineno - 1][end:]).decode()
        if mutated == original or (lineno, mutated) in seen:
            continue
        new_source = "\n".join(raw_lines[: lineno - 1] + [mutated] + raw_lines[lineno:])
        try:
            ast.parse(new_source)
        except SyntaxError:
            continue
        seen.add((lineno, mutated))
        out.append(Mutation(file, lineno, operator, original, mutated))
    return out


def unique_window(original: str, mutated: str, line: int) -> tuple[str, str]:
    """The smallest block of whole lines around `line` (1-based) that occurs exactly once in
    both the original and the mutated file: the (old, new) pair of the fixing str_replace."""
    o_lines, m_lines = original.split("\n"), mutated.split("\n")
    i = line - 1
    for radius in range(0, max(len(o_lines), 1)):
        lo, hi = max(0, i - radius), min(len(o_lines), i + radius + 1)
        before = "\n".join(o_lines[lo:hi])
        after = "\n".join(m_lines[lo:hi])
        if original.count(before) == 1 and mutated.count(after) == 1:
            return before, after
    raise ValueError("no unique window around the mutated line")


def apply_mutation(source: str, mutation: Mutation) -> str:
    lines = source.split("\n")
    if lines[mutation.line - 1] != mutation.original:
        raise ValueError(f"{mutation.file}:{mutation.line} does not match the mutation's original line")
    lines[mutation.line - 1] = mutation.mutated
    return "\n".join(lines)
