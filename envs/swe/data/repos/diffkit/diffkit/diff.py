"""Diffs from the LCS table. Operations are (tag, line) with tag in ' ', '-', '+'."""


class PatchError(ValueError):
    pass


def _lcs_table(a, b):
    n, m = len(a), len(b)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if a[i] == b[j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    return table


def lcs_length(a, b):
    return _lcs_table(a, b)[0][0]


def diff_ops(a, b):
    """Edit operations turning list a into list b; deletions come before insertions."""
    table = _lcs_table(a, b)
    ops = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            ops.append((" ", a[i]))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            ops.append(("-", a[i]))
            i += 1
        else:
            ops.append(("+", b[j]))
            j += 1
    ops.extend(("-", line) for line in a[i:])
    ops.extend(("+", line) for line in b[j:])
    return ops


def similarity(a, b):
    """2 * matches / total lines, 1.0 for two empty inputs."""
    total = len(a) + len(b)
    if total == 0:
        return 1.0
    return 2 * lcs_length(a, b) / total


def apply_ops(a, ops):
    """Rebuild the new list from the old one and the operations, checking every line."""
    out = []
    i = 0
    for tag, line in ops:
        if tag == "+":
            out.append(line)
            continue
        if i >= len(a) or a[i] != line:
            raise PatchError(f"line {i + 1} does not match: expected {line!r}")
        if tag == " ":
            out.append(line)
        i += 1
    if i != len(a):
        raise PatchError("the patch does not cover the whole input")
    return out


def unified_diff(a, b, context=3, from_name="a", to_name="b"):
    """Unified diff text with hunks of `context` lines around each change."""
    ops = diff_ops(a, b)
    changed = [k for k, (tag, _) in enumerate(ops) if tag != " "]
    if not changed:
        return ""
    groups = []
    start = changed[0]
    end = changed[0]
    for k in changed[1:]:
        if k - end > 2 * context:
            groups.append((start, end))
            start = k
        end = k
    groups.append((start, end))
    lines = [f"--- {from_name}", f"+++ {to_name}"]
    for start, end in groups:
        lo = max(0, start - context)
        hi = min(len(ops), end + context + 1)
        old_start = sum(1 for tag, _ in ops[:lo] if tag != "+") + 1
        new_start = sum(1 for tag, _ in ops[:lo] if tag != "-") + 1
        hunk = ops[lo:hi]
        old_len = sum(1 for tag, _ in hunk if tag != "+")
        new_len = sum(1 for tag, _ in hunk if tag != "-")
        lines.append(f"@@ -{old_start},{old_len} +{new_start},{new_len} @@")
        lines.extend(tag + line for tag, line in hunk)
    return "\n".join(lines) + "\n"
