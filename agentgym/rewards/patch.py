"""SWE-RL's patch-similarity reward: how close a predicted diff is to the reference diff, with no
test run (Wei et al. 2025, "SWE-RL", sec. 2):

    R = -1                                            if the answer is not a well-formed patch
    R = difflib.SequenceMatcher(None, predicted, reference).ratio()    otherwise, in [0, 1]

Both patches are first put in one canonical form (file sections sorted by path, `index` lines with
blob hashes dropped) so that the order of files and the hashes do not count. Hunks that change no
code are dropped from both first (`changes_code`: the hunk's old and new sides read the same once
whitespace between tokens, blank lines and, in Python files, comments are set aside): a trivial
edit scores as what it is, no change. A patch left with no hunk scores -1 like an empty one (a
space added to the buggy line, the bug left in, used to score 0.96). What the score still cannot
tell is in docs/rewards.md: a wrong edit of the right line scores close to the fix. Binary file sections
cannot be compared as text: they are left out, with a note. A patch longer than `max_chars` is cut
to that length before comparing (SequenceMatcher's cost grows with the product of the lengths),
also with a note; the note is meant for the step's info, one line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

MAX_PATCH_CHARS = 20_000

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


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


# A token of code: a string literal, a word, or one other character (whitespace between tokens
# does not count; inside a string literal it does).
_TOKEN = re.compile(r"""[rbuRBU]{0,2}(?:"(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?)|\w+|[^\w\s]""")


def code_line(line: str, python: bool) -> str:
    """The line as code: its indentation, then its tokens one space apart ('' for a blank line or,
    in Python, a comment-only one; a trailing comment is dropped)."""
    tokens = _TOKEN.findall(line)
    if python and "#" in tokens:
        tokens = tokens[: tokens.index("#")]
    if not tokens:
        return ""
    indent = len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())
    return " " * indent + " ".join(tokens)


def changes_code(hunk: list[str], python: bool) -> bool:
    """Whether a hunk (its header, then ' ', '-', '+' lines) changes any code line."""
    def side(signs: str) -> list[str]:
        lines = (code_line(x[1:], python) for x in hunk[1:] if x[:1] in signs)
        return [x for x in lines if x]

    return side(" -") != side(" +")


def code_changes_only(section: str, path: str) -> str | None:
    """The file section without its hunks that change no code; None when none is left (a section
    that creates, deletes or renames a file without hunks is kept as it is)."""
    lines = section.split("\n")
    starts = [i for i, x in enumerate(lines) if _HUNK.match(x)]
    if not starts:
        return section
    hunks = [lines[a:b] for a, b in zip(starts, starts[1:] + [len(lines)])]
    kept = [h for h in hunks if changes_code(h, path.endswith(".py"))]
    return "\n".join(lines[: starts[0]] + [x for h in kept for x in h]) if kept else None


def code_files(files: dict[str, str]) -> dict[str, str]:
    """The file sections that change code, each without its trivial hunks."""
    out = {path: code_changes_only(sec, path) for path, sec in files.items()}
    return {path: sec for path, sec in out.items() if sec is not None}


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


def canonical(files: dict[str, str]) -> str:
    return "\n".join(files[p] for p in sorted(files)) + "\n"


def patch_similarity(predicted: str | None, reference: str, max_chars: int = MAX_PATCH_CHARS) -> PatchScore:
    """SWE-RL's reward for one predicted patch against the reference patch."""
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
    pred_code, ref_code = code_files(pred[0]), code_files(ref[0])
    if not pred_code:
        return PatchScore(-1.0, "no code change: the patch changes only whitespace, blank lines or comments")
    if not ref_code:
        raise ValueError("the reference patch changes no code: check the task's data")
    if len(pred_code) < len(pred[0]):
        notes.append(f"{len(pred[0]) - len(pred_code)} file(s) with no code change left out")
    a, b = canonical(pred_code), canonical(ref_code)
    if len(a) > max_chars or len(b) > max_chars:
        notes.append(f"patch of {len(a)} characters cut to {max_chars} for the similarity")
        a, b = a[:max_chars], b[:max_chars]
    return PatchScore(difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), "; ".join(notes))


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
