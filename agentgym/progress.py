"""Progress that shows in any terminal, and in log files too.

A command opens a `session()`; long loops inside it (SFT epochs, RL iterations, evaluation,
`collect`) open `bar()`s. On a terminal the bars are rich progress bars, nested ones as extra rows.
When output is not a terminal (a log file, CI) a bar prints plain lines instead, with elapsed time
and ETA: one per `line()` call (an epoch or iteration done) and, for bars given `every=seconds`,
at most one every that many seconds. Outside a session, bars do nothing, so library calls stay
quiet unless a command asked for progress.

    with progress.session():
        with progress.bar("SFT", total=steps, unit="steps") as b:
            ...; b.update(advance=1)
            b.line(f"epoch {e}: loss {loss:.4f}")

The session is an object, passed to the code that draws in it: library functions that show
progress take a `session` parameter (`collect`, `run_eval`/`evaluate`, `train`, the batch
producer, SFT) and hand it down, and a thread draws in the session it was handed. Their default,
`progress.CURRENT`, stands for the session the calling command opened in this context (a
`contextvars.ContextVar`, as `decimal.localcontext`), so a user's
`with progress.session(): collect(...)` shows its bar; `resolve(session)` turns that default into
the session itself once, at the entry point. Two sessions (two threads, two tests) never share bars.

AGENTGYM_PROGRESS=rich|plain|off overrides the terminal detection.
"""

from __future__ import annotations

import contextvars
import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator, TextIO

# The session of the running command in this context (None: bars do nothing), read only to give
# `session=CURRENT` parameters their value. Context-local, so two sessions (two threads, two tests)
# never share bars; set only by session().
_CURRENT: "contextvars.ContextVar[Session | None]" = contextvars.ContextVar("agentgym_progress", default=None)


class _CurrentSession:
    """The type of CURRENT (a default that names no session yet, unlike None: no bars)."""

    def __repr__(self) -> str:
        return "progress.CURRENT"


CURRENT = _CurrentSession()  # a `session=` default: the session the calling command opened, if any


def resolve(session: "Session | None | _CurrentSession") -> "Session | None":
    """The session that `session` stands for: itself, or for CURRENT the one the calling command
    opened in this context; None when there is none or it is turned off (bars do nothing)."""
    s = _CURRENT.get() if session is CURRENT else session
    return s if s is not None and s.mode != "off" else None


def format_seconds(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = int(round(max(seconds, 0.0)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Bar:
    """One loop's progress. `update` moves it, `line` reports a finished epoch/iteration."""

    def __init__(self, session: "Session | None", description: str, total: int | None, unit: str,
                 completed: int, every: float | None, depth: int):
        self.session = session
        self.description = description
        self.total = total
        self.unit = unit
        self.completed = completed
        self.start_completed = completed  # a resumed run: the rate counts only what this process did
        self.started = time.monotonic()
        self.every = every
        self.depth = depth
        self.info = ""
        self._last_line = self.started
        self._task = None
        self._timed = [0, 0.0]
        self._emitted: int | None = None  # `completed` at the last plain line  # items timed by the caller, their seconds (set-up time stays out of the ETA)

    @property
    def active(self) -> bool:
        return self.session is not None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        if self.total is None:
            return None
        if self._timed[0]:
            return self._timed[1] / self._timed[0] * max(self.total - self.completed, 0)
        done = self.completed - self.start_completed
        return self.elapsed() / done * max(self.total - self.completed, 0) if done > 0 else None

    def status(self, info: str | None = None) -> str:
        """`desc 3/10 steps (30%) elapsed 0:12 eta 0:28 info` (the plain line)."""
        total = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.completed / self.total:.0f}%)" if self.total else ""
        text = (f"{self.description} {self.completed}{total} {self.unit}{pct}  elapsed {format_seconds(self.elapsed())}"
                f"  eta {format_seconds(self.eta()) if self.completed < (self.total or 0) else '0:00'}")
        info = self.info if info is None else info
        return f"{text}  {info}" if info else text

    def update(self, completed: int | None = None, *, advance: int = 0, info: str | None = None,
               total: int | None = None, item_seconds: float | None = None) -> None:
        """item_seconds: how long the one item just finished took; when given, the ETA is built from
        these alone (an RL iteration's time, not the SFT and evaluation before the first one)."""
        if item_seconds is not None:
            self._timed[0] += 1
            self._timed[1] += float(item_seconds)
        if total is not None:
            self.total = total
        if completed is not None:
            self.completed = completed
        self.completed += advance
        if info is not None:
            self.info = info
        if self.session is None:
            return
        if self.session.rich is not None:
            self.session.rich.update(self._task, completed=self.completed, total=self.total, info=self.info)
        elif self.every is not None and time.monotonic() - self._last_line >= self.every:
            self._emit(self.status())

    def line(self, info: str | None = None) -> None:
        """An epoch or iteration is done: a permanent line on a terminal and in a log."""
        if info is not None:
            self.info = info
        if self.session is not None:
            self._emit(self.status())

    def _emit(self, text: str) -> None:
        self._last_line = time.monotonic()
        self._emitted = self.completed
        self.session.print(text)

    def _close(self, ok: bool) -> None:
        if self.session is None:
            return
        if self.session.rich is not None:
            self.session.rich.remove_task(self._task)
        elif ok and self.depth == 0 and self.every is not None and self._emitted != self.completed:
            self._emit(self.status())  # the end of a top-level bar (nested bars' last lines would be noise)


class Session:
    """Where bars draw and lines go: a rich display on a terminal, plain lines otherwise.
    Made by `session()`; hand it to code that should draw into it (`bar`, `log`)."""

    def __init__(self, mode: str, stream: TextIO):
        self.mode = mode
        self.stream = stream
        self.rich = None
        self.depth = 0
        self._console = None

    def print(self, text: str) -> None:
        if self.rich is not None:
            self.rich.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def bar(self, description: str, total: int | None = None, *, unit: str = "", completed: int = 0,
            every: float | None = 60.0):
        """A bar in this session (wherever it is called from; see the module-level `bar`)."""
        return _bar(self, description, total, unit, completed, every)

    def log(self, text: str) -> None:
        self.print(text)


# Rich falls back to 80 columns when output is not a terminal, and cuts table headers to fit
# ("episod…"); a log file has no width, so tables get this many columns there.
LOG_WIDTH = 240


def output_console(stderr: bool = False, **kwargs):
    """A rich Console for a command's output: the terminal's width on a terminal, LOG_WIDTH in a file
    or pipe (unless COLUMNS says otherwise), so tables are never cut in a log."""
    from rich.console import Console

    if "width" not in kwargs and not os.environ.get("COLUMNS") and not Console(stderr=stderr).is_terminal:
        kwargs["width"] = LOG_WIDTH
    return Console(stderr=stderr, **kwargs)


def _mode(stream: TextIO) -> str:
    forced = os.environ.get("AGENTGYM_PROGRESS", "").strip().lower()
    if forced in ("rich", "plain", "off"):
        return forced
    from rich.console import Console

    return "rich" if Console(file=stream).is_terminal else "plain"


@contextmanager
def session(stream: TextIO | None = None, mode: str | None = None) -> Iterator[Session]:
    """Turn progress on for the bars opened inside, in this context (reentrant: an inner session
    joins the outer one)."""
    if (outer := _CURRENT.get()) is not None:
        yield outer
        return
    stream = stream if stream is not None else sys.stdout
    s = Session(mode or _mode(stream), stream)
    progress = None
    if s.mode == "rich":
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[unit]}"), TimeElapsedColumn(), TextColumn("eta"),
                            TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                            console=Console(file=stream), transient=False)
        progress.start()
        s.rich = progress
    token = _CURRENT.set(s if s.mode != "off" else None)
    try:
        yield s
    finally:
        _CURRENT.reset(token)
        if progress is not None:
            progress.stop()


def log(text: str, session: "Session | None | _CurrentSession" = CURRENT) -> None:
    """Print a line above `session`'s bars (or plainly, without one)."""
    if (s := resolve(session)) is not None:
        s.print(text)
    else:
        print(text, flush=True)


def bar(description: str, total: int | None = None, *, unit: str = "", completed: int = 0,
        every: float | None = 60.0, enabled: bool = True, session: "Session | None | _CurrentSession" = CURRENT):
    """A progress bar in `session` (by default the calling command's; a do-nothing Bar without one).

    every: in plain mode, print a line at most every `every` seconds while running (None: only
    on `line()`), and a last one at the end for a top-level bar. enabled=False: a do-nothing Bar."""
    return _bar(resolve(session) if enabled else None, description, total, unit, completed, every)


@contextmanager
def _bar(s: "Session | None", description: str, total: int | None, unit: str, completed: int,
         every: float | None) -> Iterator[Bar]:
    if s is not None and s.mode == "off":
        s = None
    b = Bar(s, description, total, unit, completed, every, s.depth if s is not None else 0)
    if s is not None:
        s.depth += 1
        if s.rich is not None:
            b._task = s.rich.add_task(description, total=total, completed=completed, unit=unit, info="")
    ok = False
    try:
        yield b
        ok = True
    finally:
        if s is not None:
            s.depth -= 1
            b._close(ok)


def active(session: "Session | None | _CurrentSession" = CURRENT) -> bool:
    return resolve(session) is not None
