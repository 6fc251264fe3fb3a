"""The agent's tools: parsing actions (text or JSON function calls) and the file tools.

JSON form (what agentgym.parsing.JSONToolCallParser hands the env):
    {"name": "str_replace", "arguments": {"path": "pkg/mod.py", "old_str": "...", "new_str": "..."}}
Text form (first word is the tool):
    bash [--timeout N] <command>
    view <path> [START[-END]]
    str_replace <path>            followed by lines:  <<<<<<< SEARCH / old / ======= / new / >>>>>>> REPLACE
    create <path>                 followed by the file content on the next lines
    run_tests [test paths]
    submit
Every problem with an action raises ActionError, whose message is shown to the agent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.envs.swe.workspace import IGNORED_NAMES, PathError, relative, resolve_inside

TOOL_NAMES = ("bash", "view", "str_replace", "create", "run_tests", "submit")
MAX_FILE_BYTES = 1 << 20
VIEW_DEFAULT_LINES = 400
_SEARCH_BLOCK = re.compile(r"^<<<<<<< SEARCH\n(.*?)\n?=======\n(.*?)\n?>>>>>>> REPLACE\s*$", re.S)
_ALIASES = {"file": "path", "filename": "path", "old": "old_str", "new": "new_str", "file_text": "content",
            "cmd": "command"}


class ActionError(ValueError):
    pass


@dataclass
class ToolCall:
    name: str
    args: dict = field(default_factory=dict)


def parse_action(text: str) -> ToolCall:
    if not isinstance(text, str) or not text.strip():
        raise ActionError("empty action: call one of " + ", ".join(TOOL_NAMES))
    stripped = text.strip()
    if stripped.startswith("<tool_call>"):
        stripped = re.sub(r"^<tool_call>|</tool_call>$", "", stripped).strip()
    if stripped[:1] in "{[":
        return _parse_json(stripped)
    return _parse_text(text.lstrip())


def _parse_json(text: str) -> ToolCall:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"the tool call is not valid JSON ({exc.msg} at position {exc.pos})") from None
    except (ValueError, RecursionError):  # e.g. "[[[[..." nested past the recursion limit
        raise ActionError("the tool call is not valid JSON") from None
    if isinstance(obj, list):
        if len(obj) != 1:
            raise ActionError("make exactly one tool call per turn")
        obj = obj[0]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ActionError('a tool call is an object {"name": ..., "arguments": {...}}')
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):
            raise ActionError("the arguments are not valid JSON") from None
    if not isinstance(args, dict):
        raise ActionError("arguments must be an object")
    return _checked(obj["name"], {_ALIASES.get(k, k): v for k, v in args.items()})


def _parse_text(text: str) -> ToolCall:
    first_line, _, rest_lines = text.partition("\n")
    head, _, rest = first_line.partition(" ")
    name = head.strip()
    rest = rest.strip()
    if name == "bash":
        command = (rest + ("\n" + rest_lines if rest_lines else "")).strip()
        args: dict = {"command": command}
        m = re.match(r"--timeout[ =](\d{1,9}(?:\.\d{1,9})?)\s+(.*)", command, flags=re.S)
        if m:
            args = {"command": m.group(2), "timeout": float(m.group(1))}
        return _checked(name, args)
    if name == "view":
        parts = rest.split()
        if not parts:
            raise ActionError("usage: view <path> [START[-END]]")
        args = {"path": parts[0]}
        spec = "-".join(parts[1:3]) if len(parts) > 1 else ""
        if spec:
            m = re.fullmatch(r"(\d{1,9})(?:[-:](\d{1,9}))?", spec)
            if not m:
                raise ActionError("line range must look like 10 or 10-40")
            args["start_line"] = int(m.group(1))
            if m.group(2):
                args["end_line"] = int(m.group(2))
        return _checked(name, args)
    if name == "str_replace":
        m = _SEARCH_BLOCK.match(rest_lines)
        if not rest or not m:
            raise ActionError(
                "usage: str_replace <path> then lines <<<<<<< SEARCH, the old text, =======, the new text, "
                ">>>>>>> REPLACE (or use the JSON form)"
            )
        return _checked(name, {"path": rest, "old_str": m.group(1), "new_str": m.group(2)})
    if name == "create":
        if not rest:
            raise ActionError("usage: create <path> followed by the content on the next lines")
        return _checked(name, {"path": rest, "content": rest_lines})
    if name == "run_tests":
        return _checked(name, {"paths": rest.split()} if rest else {})
    if name == "submit":
        return _checked(name, {})
    raise ActionError(f"unknown tool {name[:40]!r}: use one of " + ", ".join(TOOL_NAMES))


def _checked(name: str, args: dict) -> ToolCall:
    """Validate argument names and types for each tool."""
    if name not in TOOL_NAMES:
        raise ActionError(f"unknown tool {name[:40]!r}: use one of " + ", ".join(TOOL_NAMES))
    need = {"bash": {"command": str}, "view": {"path": str}, "str_replace": {"path": str, "old_str": str, "new_str": str},
            "create": {"path": str, "content": str}, "run_tests": {}, "submit": {}}[name]
    for key, typ in need.items():
        if key not in args:
            raise ActionError(f"{name} needs the argument {key!r}")
        if not isinstance(args[key], typ):
            raise ActionError(f"{name}: {key!r} must be a string")
        if key in ("command", "path") and "\x00" in args[key]:
            raise ActionError(f"{name}: {key!r} contains a NUL byte")
    if name == "bash":
        if not args["command"].strip():
            raise ActionError("bash needs a command")
        if "timeout" in args and args["timeout"] is not None:
            try:
                args["timeout"] = float(args["timeout"])
                if args["timeout"] != args["timeout"]:  # NaN
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise ActionError("bash: timeout must be a number of seconds") from None
    if name == "view":
        if "view_range" in args:
            vr = args.pop("view_range")
            if not (isinstance(vr, list) and len(vr) == 2):
                raise ActionError("view_range must be [start, end]")
            args["start_line"], args["end_line"] = vr
        for key in ("start_line", "end_line"):
            if args.get(key) is not None and (not isinstance(args[key], int) or isinstance(args[key], bool)):
                raise ActionError(f"view: {key} must be an integer")
    if name == "run_tests":
        paths = args.get("paths", [])
        if isinstance(paths, str):
            paths = paths.split()
        if not isinstance(paths, list) or not all(isinstance(p, str) and "\x00" not in p for p in paths):
            raise ActionError("run_tests: paths must be a list of test paths")
        args = {"paths": paths}
    return ToolCall(name, args)


def format_call(name: str, **arguments) -> str:
    """The canonical JSON of a call, byte-identical to what JSONToolCallParser produces."""
    return json.dumps({"arguments": arguments, "name": name}, ensure_ascii=False, sort_keys=True)


# --- file tools (run on the host, confined to the workspace) ------------------------------------

def view(ws: Path, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
    target = resolve_inside(ws, path)
    if not target.exists():
        raise PathError(f"{path} does not exist")
    if target.is_dir():
        entries = []
        for p in sorted(target.rglob("*")):
            rel = p.relative_to(target)
            if len(rel.parts) > 2 or any(part in IGNORED_NAMES for part in rel.parts):
                continue
            entries.append(str(rel) + ("/" if p.is_dir() else ""))
        return f"{relative(ws, target) or '.'}/\n" + "\n".join("  " + e for e in entries)
    if not target.is_file():
        raise PathError(f"{path} is not a regular file")
    if target.stat().st_size > MAX_FILE_BYTES:
        raise PathError(f"{path} is larger than {MAX_FILE_BYTES} bytes; use bash (head, sed -n) instead")
    lines = target.read_text(errors="replace").split("\n")
    start = max(1, start_line or 1)
    end = min(len(lines), end_line if end_line is not None else start + VIEW_DEFAULT_LINES - 1)
    if start > len(lines):
        raise PathError(f"{path} has only {len(lines)} lines")
    if end < start:
        raise PathError("end_line is before start_line")
    body = "\n".join(f"{i:5d}  {lines[i - 1]}" for i in range(start, end + 1))
    more = f"\n[lines {end + 1}-{len(lines)} not shown]" if end < len(lines) else ""
    return f"{relative(ws, target)} (lines {start}-{end} of {len(lines)})\n{body}{more}"


def str_replace(ws: Path, path: str, old_str: str, new_str: str) -> str:
    target = resolve_inside(ws, path)
    if not target.is_file():
        raise PathError(f"{path} is not an existing file")
    text = target.read_text(errors="replace")
    if not old_str:
        raise ActionError("old_str must not be empty")
    count = text.count(old_str)
    if count == 0:
        raise ActionError(f"old_str was not found in {path}; view the file and copy the text exactly")
    if count > 1:
        raise ActionError(f"old_str occurs {count} times in {path}; include more surrounding lines to make it unique")
    new_text = text.replace(old_str, new_str, 1)
    target.write_text(new_text)
    line = text[: text.index(old_str)].count("\n") + 1
    snippet_end = line + new_str.count("\n")
    return f"Edited {relative(ws, target)}.\n" + view(ws, relative(ws, target), max(1, line - 3), snippet_end + 3)


def create(ws: Path, path: str, content: str) -> str:
    target = resolve_inside(ws, path)
    if target == ws.resolve() or target.is_dir():
        raise PathError(f"{path} is a directory")
    if len(content.encode()) > MAX_FILE_BYTES:
        raise ActionError(f"content is larger than {MAX_FILE_BYTES} bytes")
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return f"{'Overwrote' if existed else 'Created'} {relative(ws, target)} ({content.count(chr(10)) + 1} lines)."


def truncate(text: str, limit: int) -> str:
    """Keep the head and tail of a long output with a marker in between."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters truncated ...]\n{text[-tail:]}"
