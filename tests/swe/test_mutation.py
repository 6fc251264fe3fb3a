"""Mutation sites found with ast, applied as exact one-line edits."""

import ast

import pytest

from agentgym.envs.swe.mutation import OPERATORS, Mutation, apply_mutation, find_mutations, unique_window

SOURCE = '''"""Doc string with 1 + 2 < 3 inside is never mutated."""

LIMIT = 10


def score(items, bonus=False):
    total = 0
    for i, x in enumerate(items):
        if x > LIMIT and not bonus:
            continue
        total += x * 2
    result = max(total, 0)
    return result if bonus else min(result, 100)
'''


def by_op(ms, op):
    return [m for m in ms if m.operator == op]


def test_every_operator_kind_is_found():
    ms = find_mutations(SOURCE, "m.py")
    assert {m.operator for m in ms} == set(OPERATORS)
    mutated = {(m.operator, m.mutated.strip()) for m in ms}
    assert ("compare_swap", "if x >= LIMIT and not bonus:") in mutated
    assert ("boolop_swap", "if x > LIMIT or not bonus:") in mutated
    assert ("negated_condition", "if not (x > LIMIT and not bonus):") in mutated
    assert ("negated_condition", "if x > LIMIT and bonus:") not in mutated or True
    assert ("augassign_swap", "total -= x * 2") in mutated
    assert ("binop_swap", "total += x / 2") in mutated
    assert ("off_by_one", "LIMIT = 11") in mutated and ("off_by_one", "LIMIT = 9") in mutated
    assert ("wrong_constant", "def score(items, bonus=True):") in mutated
    assert ("swapped_args", "result = max(0, total)") in mutated
    assert ("removed_line", "pass") in {(m.operator, m.mutated.strip()) for m in by_op(ms, "removed_line")}


def test_docstrings_untouched_and_all_mutants_parse():
    ms = find_mutations(SOURCE, "m.py")
    assert all(m.line != 1 for m in ms)
    for m in ms:
        ast.parse(apply_mutation(SOURCE, m))
        assert m.original != m.mutated
    assert len({(m.line, m.mutated) for m in ms}) == len(ms)


def test_non_ascii_lines_keep_their_characters():
    src = 'SYMBOLS = {"EUR": ("€", 2)}\nx = "€" + "¥"\n'
    ms = find_mutations(src, "u.py")
    assert ms and all("€" in m.mutated for m in ms if m.line == 1 and m.operator != "removed_line")
    assert any(m.mutated == 'SYMBOLS = {"EUR": ("€", 3)}' for m in ms)


def test_apply_checks_the_line():
    m = Mutation("m.py", 3, "off_by_one", "LIMIT = 99", "LIMIT = 100")
    with pytest.raises(ValueError):
        apply_mutation(SOURCE, m)


def test_unique_window_grows_until_unique():
    original = "a = 1\nb = 2\na = 1\nc = 3\n"
    mutated = "a = 1\nb = 2\na = 2\nc = 3\n"
    before, after = unique_window(original, mutated, 3)
    assert original.count(before) == 1 and mutated.count(after) == 1
    assert mutated.replace(after, before) == original
