"""SWE-RL's patch-similarity reward, scored on the edit rather than on the diff's text (after Wei et
al. 2025, "SWE-RL", sec. 2, which compares the two diffs' text with difflib):

    R = -1                                  if the answer is not a well-formed patch, or changes no code
    R = ratio(removed) * ratio(added)        otherwise, in [0, 1]

where `removed` (`added`) is the sequence of code tokens the patch takes out of (writes into) the
buggy files, each token with its file and its line in the buggy file, and ratio() is
difflib.SequenceMatcher's ratio between the predicted patch's sequence and the reference's (1 when
both are empty). Tokens are strings, words and single symbols, plus each line's indentation and
its end; whitespace between tokens, blank lines and (in `.py` files) comments are not code.

Why the edit and not the diff: most of a diff's text is given to the agent for free. Context lines
and the removed lines are copies of the buggy file, so on the diff's text, deleting the buggy line
scored 0.93 against a one-line fix and a comment on the buggy line 0.96, while the tests failed. A
patch is scored on what it changes, token by token: within each run of changed lines the old and new
tokens are compared again, so a line rewritten unchanged (a comment or a space added) changes
nothing, and both ratios must be high for a high score: deleting the right line without writing
the fix scores 0, as does writing the fix's line somewhere else. The line numbers tie the edit to
its place: the same token change on another line matches nothing.

What the score still cannot tell is in docs/rewards.md: an equivalent fix written differently scores
low. Binary file sections cannot be compared as text: they are left out, with a note. A patch
longer than `max_chars` is cut to that length (at a line end) before comparing, also with a note;
the note is meant for the step's info, one line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

MAX_PATCH_CHARS = 20_000

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


@dataclass(frozen=True)
class PatchScore:
    score: float  # -1 for no or malformed patch, else in [0, 1]
    note: str = ""  # one line: why -1, or what was left out / cut


def _sections(lines: list[str]) -> list[list[str]] | None:
    """The file sections of a diff: from each `diff --git` line, or (plain diff -u) from each
    `--- ` line followed by a `+++ ` line; None when there is none or text precedes the first."""
    if any(x.startswith("diff --git ") for x in lines):
        starts = [i for i, x in enumerate(lines) if x.startswith("diff --git ")]
    else:
        starts = [i for i, x in enumerate(lines[:-1]) if x.startswith("--- ") and lines[i + 1].startswith("+++ ")]
    if not starts or any(x.strip() for x in lines[: starts[0]]):
        return None
    return [lines[a:b] for a, b in zip(starts, starts[1:] + [len(lines)])]


def split_files(patch: str) -> tuple[dict[str, str], list[str]] | None:
    """{path: file section} and the paths of binary sections, or None when the text is not a
    unified diff (file headers, each followed by well-formed hunks)."""
    sections = _sections(patch.replace("\r\n", "\n").split("\n"))
    if sections is None:
        return None
    files: dict[str, str] = {}
    binary: list[str] = []
    for sec in sections:
        path = _path_of(sec)
        if path is None:
            return None
        body = [x for x in sec if not x.startswith("index ")]
        if any(x.startswith("GIT binary patch") or (x.startswith("Binary files ") and x.endswith(" differ"))
               for x in body):
            binary.append(path)
            continue
        if not _well_formed(body):
            return None
        files[path] = "\n".join(body).rstrip("\n")
    return files, binary


def _strip(name: str, prefix: str) -> str:
    name = name.split("\t")[0].strip()
    return name[2:] if name.startswith(prefix) else name


def _path_of(section: list[str]) -> str | None:
    """The file's path: the new name (+++ b/...), the old one for a deletion, else the git header's."""
    new = next((_strip(x[4:], "b/") for x in section if x.startswith("+++ ")), None)
    old = next((_strip(x[4:], "a/") for x in section if x.startswith("--- ")), None)
    for name in (new, old):
        if name and name != "/dev/null":
            return name
    m = re.match(r"diff --git a/(\S+) b/(\S+)", section[0])
    return m.group(2) if m else None


def _well_formed(body: list[str]) -> bool:
    """At least one hunk; every line after the first hunk header is context, +, -, '\\ No newline' or another hunk."""
    in_hunk, hunks = False, 0
    for line in body:
        if _HUNK.match(line):
            in_hunk, hunks = True, hunks + 1
        elif in_hunk and line and line[0] not in " +-\\":
            return False
    return hunks > 0 or any(x.startswith(("new file mode", "deleted file mode", "rename from")) for x in body)


# A token of code: a string literal, a word, or one other character (whitespace between tokens
# does not count; inside a string literal it does).
_TOKEN = re.compile(r"""[rbuRBU]{0,2}(?:"(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?)|\w+|[^\w\s]""")
# Above this many old x new tokens in one run of changed lines, the run's tokens are compared as
# they stand (all removed, all added) instead of aligned again: it bounds SequenceMatcher's cost.
MAX_ALIGN = 1_000_000


def code_tokens(line: str, python: bool) -> list[str]:
    """The line's code tokens: its indentation, its tokens, its end ([] for a blank line or, in
    Python, a comment-only one; a trailing comment is dropped)."""
    tokens = _TOKEN.findall(line)
    if python and "#" in tokens:
        tokens = tokens[: tokens.index("#")]
    if not tokens:
        return []
    indent = len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())
    return [f"<indent {indent}>", *tokens, "<end>"]


Edit = tuple[str, int, str]  # (file, line of the buggy file, token)


def file_edits(path: str, section: str) -> tuple[list[Edit], list[Edit]]:
    """The tokens one file section removes and adds, each at its line of the old (buggy) file: an
    added token sits at the line it replaces or is inserted before. Each run of '-' and '+' lines
    is compared token by token, so what a run leaves as it was is neither removed nor added."""
    removed: list[Edit] = []
    added: list[Edit] = []
    python = path.endswith(".py")
    old_line = 0
    run_old: list[tuple[int, str]] = []
    run_new: list[str] = []

    def close_run() -> None:
        old = [tok for _, tok in run_old]
        if len(old) * len(run_new) > MAX_ALIGN:
            ops = [("replace", 0, len(old), 0, len(run_new))]
        else:
            ops = difflib.SequenceMatcher(None, old, run_new, autojunk=False).get_opcodes()
        for op, i1, i2, j1, j2 in ops:
            if op == "equal":
                continue
            removed.extend((path, run_old[i][0], run_old[i][1]) for i in range(i1, i2))
            at = run_old[i1][0] if i1 < len(run_old) else old_line
            added.extend((path, at, tok) for tok in run_new[j1:j2])
        run_old.clear()
        run_new.clear()

    in_hunk = False
    for line in section.split("\n"):
        m = _HUNK.match(line)
        if m:
            close_run()
            in_hunk = True
            # `@@ -5,0 ...` (no old line) inserts after line 5, i.e. before line 6
            old_line = int(m.group(1)) + (m.group(2) == "0")
        elif not in_hunk or line[:1] == "\\":
            continue  # the file's header, or "\\ No newline at end of file"
        elif line[:1] == "-":
            run_old.extend((old_line, tok) for tok in code_tokens(line[1:], python))
            old_line += 1
        elif line[:1] == "+":
            run_new.extend(code_tokens(line[1:], python))
        else:  # context (an empty line is a context line whose space was stripped)
            close_run()
            old_line += 1
    close_run()
    return removed, added


def edits(files: dict[str, str]) -> dict[str, tuple[list[Edit], list[Edit]]]:
    """{path: (removed, added)} of the file sections that change code."""
    out = {path: file_edits(path, sec) for path, sec in sorted(files.items())}
    return {path: e for path, e in out.items() if e[0] or e[1]}


def _ratio(a: list[Edit], b: list[Edit]) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()  # 1.0 when both are empty


def _cut(files: dict[str, str], max_chars: int) -> tuple[dict[str, str], int]:
    """The sections in path order up to `max_chars` characters, the last one cut at a line end (and
    left out if no hunk of it is left); and the patch's length."""
    out: dict[str, str] = {}
    left = max_chars
    for path in sorted(files):
        sec = files[path]
        if len(sec) > left:
            sec = sec[: sec.rfind("\n", 0, max(left, 0)) + 1]
            if any(_HUNK.match(x) for x in sec.split("\n")):
                out[path] = sec
            break
        out[path] = sec
        left -= len(sec) + 1
    return out, sum(len(sec) + 1 for sec in files.values())


def patch_similarity(predicted: str | None, reference: str, max_chars: int = MAX_PATCH_CHARS) -> PatchScore:
    """The reward for one predicted patch against the reference patch (the module's docstring)."""
    if not predicted or not predicted.strip():
        return PatchScore(-1.0, "no patch: the workspace has no changes")
    pred = split_files(predicted)
    if pred is None:
        return PatchScore(-1.0, "malformed patch: not a unified diff with file headers and hunks")
    ref = split_files(reference)
    if ref is None:
        raise ValueError("the reference patch is not a unified diff: check the task's data")
    notes = []
    if pred[1]:
        notes.append(f"binary files left out of the comparison: {', '.join(pred[1][:5])}")
    if not pred[0]:
        return PatchScore(-1.0, "no text patch: " + "; ".join(notes))
    pred_files, length = _cut(pred[0], max_chars)
    if length > max_chars:
        notes.append(f"patch of {length} characters cut to {max_chars} for the similarity")
    pred_edits, ref_edits = edits(pred_files), edits(_cut(ref[0], max_chars)[0])
    if not pred_edits:
        return PatchScore(-1.0, "no code change: the patch changes only whitespace, blank lines or comments")
    if not ref_edits:
        raise ValueError("the reference patch changes no code: check the task's data")
    if len(pred_edits) < len(pred_files):
        notes.append(f"{len(pred_files) - len(pred_edits)} file(s) with no code change left out")
    removed = _ratio(*([e for f in side.values() for e in f[0]] for side in (pred_edits, ref_edits)))
    added = _ratio(*([e for f in side.values() for e in f[1]] for side in (pred_edits, ref_edits)))
    return PatchScore(removed * added, "; ".join(notes))


# --- making the predicted patch from a workspace ------------------------------------------------------
MAX_FILE_BYTES = 1_000_000  # larger files are reported as binary: a diff of them says nothing useful
SKIP_NAMES = frozenset({"__pycache__", ".pytest_cache", ".git", ".mypy_cache"})


def _as_text(data: bytes | None) -> list[str] | None:
    """Lines of a text file, [] for an absent one, None for binary (NUL bytes, not UTF-8, or huge)."""
    if data is None:
        return []
    if len(data) > MAX_FILE_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_patch(path: str, old: bytes | None, new: bytes | None) -> str:
    """The git-style diff section of one file (old None: created; new None: deleted); '' if equal."""
    if old == new:
        return ""
    a, b = _as_text(old), _as_text(new)
    header = f"diff --git a/{path} b/{path}\n"
    if a is None or b is None:
        return header + f"Binary files a/{path} and b/{path} differ\n"
    lines = list(difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{path}",
                                      "/dev/null" if new is None else f"b/{path}", n=3))
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return header + "".join(out)


def read_tree(root: Path, skip_top: tuple[str, ...] = ()) -> dict[str, bytes]:
    """{relative path: bytes} of the regular files under root (links and caches left out)."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in skip_top or SKIP_NAMES.intersection(rel.parts) or path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        # a huge file is not read: its placeholder is binary, so it is reported, not compared
        files[rel.as_posix()] = path.read_bytes() if size <= MAX_FILE_BYTES else b"\0huge file of %d bytes" % size
    return files


def tree_patch(original: dict[str, bytes], current: dict[str, bytes]) -> str:
    """The diff that turns the `original` files into the `current` ones, file by file in path order."""
    return "".join(file_patch(p, original.get(p), current.get(p)) for p in sorted(set(original) | set(current)))
