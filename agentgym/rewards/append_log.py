"""An append-only JSONL file of records that a run writes one at a time and the next run reads back
(the judge's answers, generated rubrics): the stores of `judge.py` and `generation.py`.

A run killed mid-append leaves a torn last line, and a file may hold lines of another kind; such
lines are skipped and counted (the records they would have held are asked for again), and the
next record appended after a torn end starts on a line of its own, so the tear never swallows it.
A file with lines but no record of this kind is refused: it is some other file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from agentgym.errors import AgentGymError, ConfigError
from agentgym.safe_files import read_regular

T = TypeVar("T")


class AppendLog:
    """`path`'s records (None: kept in memory only). `what` names the file in errors ("judge
    cache"), `records` its records ("judge answers"), `fix` says what to do ("point
    env.reward.judge.cache at a JSONL file of its own"). `max_bytes`: a larger file is not one."""

    def __init__(self, path: str | Path | None, what: str, records: str, fix: str, max_bytes: int = 1 << 30):
        self.path = Path(path) if path else None
        self.what, self.records, self.fix, self.max_bytes = what, records, fix, max_bytes
        self.skipped_lines = 0  # torn or foreign lines, left out
        self._torn_end = False  # the file ends mid-line: the next record starts on a line of its own

    def read(self, parse: Callable[[Any], T | None]) -> list[T]:
        """parse(row) of each line that holds JSON, in file order; a line that is not JSON, nests too
        deeply, or that parse refuses (None, or KeyError / TypeError / ValueError) is skipped and
        counted. No file yet: no records."""
        if self.path is None or not os.path.lexists(self.path):
            return []
        try:
            text = read_regular(self.path, self.max_bytes, self.what).decode("utf-8", "replace")
        except OSError as exc:  # not a regular file, too large, unreadable (/proc/self/mem)
            why = str(exc) if isinstance(exc, AgentGymError) else f"cannot read {self.what} {self.path} " \
                f"({exc.strerror or type(exc).__name__})"
            raise ConfigError(f"{why}: {self.fix}") from None
        self._torn_end = bool(text) and not text.endswith("\n")
        lines = [line for line in text.splitlines() if line.strip()]
        out: list[T] = []
        for line in lines:
            try:
                record = parse(json.loads(line))
            except (ValueError, RecursionError, TypeError, KeyError):
                record = None
            if record is None:
                self.skipped_lines += 1
            else:
                out.append(record)
        if lines and not out:
            raise ConfigError(f"{self.what} {self.path} holds no {self.records} ({len(lines)} other lines): {self.fix} "
                              "(it is appended to)")
        return out

    def append(self, row: dict) -> None:
        """One record on a line of its own, at the end of the file (made, with its folder, if missing)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(("\n" if self._torn_end else "") + json.dumps(row, ensure_ascii=False) + "\n")
        self._torn_end = False
