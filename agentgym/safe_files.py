"""Reading files a user or an attacker may have placed: only regular files, never more than a
stated number of bytes, JSON without deep nesting tracebacks.

`open()` on a FIFO waits for a writer for good, `read()` of `/dev/zero` (or a link to it) never
ends and fills memory, and `json.loads` of 100,000 nested brackets raises RecursionError. Every
reader of a file that comes from a data folder, a cache or a run folder goes through here, and
each refusal is one line naming the file. It imports only agentgym.errors, so every layer can
use it (docs/architecture.md).
"""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from agentgym.errors import AgentGymError

MiB = 1 << 20
T = TypeVar("T")


class UnsafeFileError(AgentGymError, OSError):
    """A file that is not a regular file, is over its size limit, or does not parse."""


def open_regular(path: str | os.PathLike, what: str = "file") -> BinaryIO:
    """The file opened for binary reading, if it is a regular file (links are followed: a link to
    /dev/zero is /dev/zero). Opened non-blocking, so a FIFO is refused instead of waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnsafeFileError(f"cannot open {what} {path} ({exc.strerror or type(exc).__name__})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a folder" if stat.S_ISDIR(mode) else "not a file")
            raise UnsafeFileError(f"{what} {path} is {kind}, not a regular file: replace it with a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, limit: int, what: str = "file") -> bytes:
    """At most `limit` bytes of a regular file; UnsafeFileError when the file is larger (checked by
    size and by reading, since a file can grow while it is read)."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise UnsafeFileError(f"{what} {path} is {max(size, len(data)):,} bytes, over the {limit:,}-byte limit: "
                              "is it the right file?")
    return data


def loads_json(text: str | bytes, where: str) -> Any:
    """json.loads with one UnsafeFileError line for bad JSON and for nesting too deep to parse."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UnsafeFileError(f"cannot read {where}: its JSON nests too deeply") from None
    except ValueError as exc:
        raise UnsafeFileError(f"cannot read {where}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None


def read_json(path: str | os.PathLike, limit: int, what: str = "JSON file") -> Any:
    """The JSON of a regular file of at most `limit` bytes, errors as one UnsafeFileError line."""
    return loads_json(read_regular(path, limit, what), f"{what} {Path(path)}")


def is_regular(path: str | os.PathLike) -> bool:
    """Whether the path (links followed) is a regular file; never blocks, never raises."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_jsonl(path: str | os.PathLike, record: str, line_shape: str, parse: Callable[[Any], T],
               error: type[AgentGymError] = UnsafeFileError, file_label: str | None = None) -> Iterator[tuple[int, T]]:
    """(line number, parse(object)) of each non-blank line of a JSONL file a user gave, whose lines
    are `record`s ("TaskSpec", "document") each of `line_shape` (shown in errors). Every refusal is
    one `error` line naming the file and, for a bad line, its number: a missing file or one that
    is not a regular file (a FIFO is refused, never waited on), a line that is not JSON or nests
    too deeply to parse, and one that parse refuses with KeyError, TypeError or ValueError.
    `file_label` names the file in the first kind ("split file"; default "<record>s file")."""
    label = file_label or f"{record}s file"
    if not os.path.exists(path):
        raise error(f"{label} {path} does not exist: pass a JSONL file of {record} lines, one {line_shape} per line")
    try:
        binary = open_regular(path, label)
    except UnsafeFileError as exc:  # a FIFO, a device, a folder: said as the caller's error
        raise error(str(exc)) from None
    with io.TextIOWrapper(binary, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                parsed = parse(json.loads(line))
            except RecursionError:
                raise error(f"{path}:{lineno}: not a {record}: its JSON nests too deeply to read") from None
            except (ValueError, KeyError, TypeError) as exc:
                raise error(f"{path}:{lineno}: not a {record} ({type(exc).__name__}: {exc}); each line must be "
                            f"{line_shape}") from None
            yield lineno, parsed
