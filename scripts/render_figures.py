"""Figures in the README and docs, rendered from their results files.

A quoted figure lives in a block whose opening comment holds a template and names its files:

    <!-- figures: docs/results/main_job.json
    Held-out success {before:.3f} -> {after:.3f}, gain {gain:+.3f} [{gain_ci[0]:+.3f}, {gain_ci[1]:+.3f}].
    -->
    Held-out success 0.321 -> 0.498, gain +0.177 [+0.128, +0.226].
    <!-- /figures -->

A placeholder `{KEY:FORMAT}` is a key path into the file (`after`, `gain_ci[0]`, `arms.gigpo.seeds[2].after`)
and a Python format spec; with several files, the path starts with the file's name and a slash
(`{main_job/after:.3f}`): a file is named by its stem, or `NAME=PATH` in the opening line names it. `{{` and `}}` are literal braces. The text between the comment and
`<!-- /figures -->` is what readers see: this script writes it, and tests/core/test_quoted_figures.py
fails when it differs from what the template renders, or when the template quotes a number of its own
(outside code spans and link targets), so every number shown comes from a key of a committed file.

    python scripts/render_figures.py            # rewrite every block of README.md and docs/*.md
    python scripts/render_figures.py --check    # list the blocks whose text is not their render
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^<!-- figures: (?P<files>[^\n]+?)\n(?P<template>.*?)^-->\n(?P<text>.*?)^<!-- /figures -->$",
                   flags=re.S | re.M)
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{(?P<key>[^{}:]+)(?::(?P<spec>[^{}]*))?\}")
# a number standing alone: not part of a word, an identifier, a path or a version such as SmolLM2 or H200
NUMBER = re.compile(r"(?<![\w.\-/])[+\-−]?\d+(?:\.\d+)?(?![\w%])")
STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


class FigureError(ValueError):
    """A template that cannot be rendered from its files: a missing key, a bad format, a stray number."""


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def lookup(data, path: str):
    """The value at a key path such as `arms.gigpo.seeds[2].after` (dots for keys, [i] for items)."""
    value = data
    for match in STEP.finditer(path):
        key, index = match.groups()
        try:
            value = value[int(index)] if index is not None else value[key]
        except (KeyError, IndexError, TypeError):
            raise FigureError(f"no key {path!r} (stopped at {match.group(0)!r})") from None
    return value


def render(template: str, files: dict[str, dict]) -> str:
    """The template with each placeholder replaced by its file's value in its format."""
    single = next(iter(files.values())) if len(files) == 1 else None

    def fill(match: re.Match) -> str:
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        key, spec = match.group("key").strip(), match.group("spec") or ""
        if single is not None:
            data, path = single, key
        else:
            stem, _, path = key.partition("/")
            if stem not in files or not path:
                raise FigureError(f"{{{key}}}: with several files a key starts with one of {sorted(files)} and '/'")
            data = files[stem]
        value = lookup(data, path)
        try:
            return format(value, spec)
        except (ValueError, TypeError) as exc:
            raise FigureError(f"{{{key}:{spec}}}: cannot format {value!r}: {exc}") from None

    return PLACEHOLDER.sub(fill, template)


def stray_numbers(template: str) -> list[str]:
    """Numbers the template writes itself, outside placeholders, code spans and link targets."""
    prose = PLACEHOLDER.sub(" ", re.sub(r"`[^`]*`|\]\([^)]*\)", " ", template))
    return NUMBER.findall(prose)


def load_files(spec: str, root: Path = ROOT) -> dict[str, dict]:
    """{name: data} of a block's files: `PATH` is named by its stem, `NAME=PATH` by NAME."""
    files = {}
    for item in spec.split():
        name, _, rel = item.rpartition("=")
        path = root / rel
        name = name or path.stem
        if not path.is_file():
            raise FigureError(f"results file {rel} does not exist")
        if name in files:
            raise FigureError(f"two files are named {name!r} in one block: write NAME=PATH for one of them")
        files[name] = json.loads(path.read_text())
    return files


def file_paths(spec: str) -> list[str]:
    return [item.rpartition("=")[2] for item in spec.split()]


def blocks(text: str):
    """(match, files spec, template, shown text) of every figures block in a document."""
    for match in BLOCK.finditer(text):
        yield match, match.group("files"), match.group("template"), match.group("text")


def check_block(files_spec: str, template: str, shown: str, root: Path = ROOT) -> list[str]:
    """What is wrong with one block: numbers of the template's own, a render that differs from the text shown."""
    problems = [f"the template writes the number {n} itself: bind it to a key" for n in stray_numbers(template)]
    try:
        rendered = render(template, load_files(files_spec, root))
    except FigureError as exc:
        return problems + [str(exc)]
    if rendered != shown:
        diff = next((i for i, (a, b) in enumerate(zip(rendered, shown)) if a != b), min(len(rendered), len(shown)))
        problems.append(f"the text differs from its render at {shown[max(0, diff - 30):diff + 30]!r} "
                        f"(render: {rendered[max(0, diff - 30):diff + 30]!r}): run python scripts/render_figures.py")
    return problems


def rewrite(path: Path, root: Path = ROOT) -> bool:
    """Render every block of `path` in place; True when the file changed."""
    text = path.read_text(encoding="utf-8")

    def fill(match: re.Match) -> str:
        files, template = match.group("files"), match.group("template")
        if numbers := stray_numbers(template):
            raise FigureError(f"{path.name}: a template writes the number {numbers[0]} itself: bind it to a key")
        return f"<!-- figures: {files}\n{template}-->\n{render(template, load_files(files, root))}<!-- /figures -->"

    new = BLOCK.sub(fill, text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only list the blocks whose text is not their render")
    args = parser.parse_args()
    failed = False
    for doc in documents():
        if args.check:
            for match, files, template, shown in blocks(doc.read_text(encoding="utf-8")):
                for problem in check_block(files, template, shown):
                    failed = True
                    print(f"{doc.relative_to(ROOT)} ({files}): {problem}")
        else:
            try:
                if rewrite(doc):
                    print(f"rendered {doc.relative_to(ROOT)}")
            except FigureError as exc:
                sys.exit(f"{doc.relative_to(ROOT)}: {exc}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
