"""Path expressions compile to a list of steps; a query applies them to a list of matches."""

import re

_FILTER = re.compile(r"^\?\(@\.(\w+)\s*(==|!=|<=|>=|<|>)\s*(.+)\)$")


class PathError(ValueError):
    pass


def _literal(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise PathError(f"bad literal {text!r}") from None


def compile_path(path):
    if not path.startswith("$"):
        raise PathError("a path starts with '$'")
    steps = []
    i = 1
    while i < len(path):
        if path.startswith("..", i):
            i += 2
            m = re.match(r"\w+|\*", path[i:])
            if not m:
                raise PathError(f"expected a name after '..' at {i}")
            steps.append(("descend", m.group(0)))
            i += len(m.group(0))
        elif path[i] == ".":
            i += 1
            m = re.match(r"\w+|\*", path[i:])
            if not m:
                raise PathError(f"expected a name after '.' at {i}")
            steps.append(("child", m.group(0)))
            i += len(m.group(0))
        elif path[i] == "[":
            end = path.find("]", i)
            if end == -1:
                raise PathError(f"unclosed '[' at {i}")
            steps.append(_bracket(path[i + 1:end]))
            i = end + 1
        else:
            raise PathError(f"unexpected {path[i]!r} at {i}")
    return steps


def _bracket(inner):
    inner = inner.strip()
    if inner == "*":
        return ("child", "*")
    if inner.startswith("?"):
        m = _FILTER.match(inner)
        if not m:
            raise PathError(f"bad filter {inner!r}")
        return ("filter", (m.group(1), m.group(2), _literal(m.group(3))))
    if ":" in inner:
        start, _, stop = inner.partition(":")
        return ("slice", (int(start) if start.strip() else None, int(stop) if stop.strip() else None))
    if inner[:1] in "'\"":
        return ("child", _literal(inner))
    try:
        return ("index", int(inner))
    except ValueError:
        raise PathError(f"bad index {inner!r}") from None


def _children(value):
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _compare(left, op, right):
    try:
        return {
            "==": left == right, "!=": left != right, "<": left < right,
            "<=": left <= right, ">": left > right, ">=": left >= right,
        }[op]
    except TypeError:
        return False


def _descendants(value):
    """value itself and everything below it, depth first."""
    out = [value]
    for child in _children(value):
        out.extend(_descendants(child))
    return out


def _apply(step, matches):
    kind, arg = step
    out = []
    for value in matches:
        if kind == "child":
            if arg == "*":
                out.extend(_children(value))
            elif isinstance(value, dict) and arg in value:
                out.append(value[arg])
        elif kind == "index":
            if isinstance(value, list) and -len(value) <= arg < len(value):
                out.append(value[arg])
        elif kind == "slice":
            if isinstance(value, list):
                out.extend(value[arg[0]:arg[1]])
        elif kind == "filter":
            key, op, literal = arg
            for item in _children(value):
                if isinstance(item, dict) and key in item and _compare(item[key], op, literal):
                    out.append(item)
        elif kind == "descend":
            for node in _descendants(value):
                out.extend(_apply(("child", arg), [node]))
    return out


def query(data, path):
    matches = [data]
    for step in compile_path(path):
        matches = _apply(step, matches)
    return matches


def set_path(data, path, new_value):
    """Set the value at a path of child names and indexes only; returns how many were set."""
    steps = compile_path(path)
    if not steps or any(kind not in ("child", "index") or arg == "*" for kind, arg in steps):
        raise PathError("set_path needs a path of plain names and indexes")
    parents = [data]
    for step in steps[:-1]:
        parents = _apply(step, parents)
    kind, arg = steps[-1]
    count = 0
    for parent in parents:
        if kind == "child" and isinstance(parent, dict):
            parent[arg] = new_value
            count += 1
        elif kind == "index" and isinstance(parent, list) and -len(parent) <= arg < len(parent):
            parent[arg] = new_value
            count += 1
    return count
