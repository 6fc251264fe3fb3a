"""What a results file records beside its figures, defined once for every benchmark.

- `command`: the command that made the figures, repo-relative (`python benchmarks/<group>/<name>.py
  ARGS`), never a machine's absolute path to the script;
- `code_version`: the short commit the code was at;
- `load_average`: how busy the machine was (a shared machine's neighbours slow wall time, hardly
  CPU time);
- `process_cpu_seconds`: this process's CPU seconds, user and system;
- from a command run under GNU `time -v` with its load sampled (`agentgym train` runs, record_run.py):
  `time_report_cpu_seconds` and `mean_load`.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]  # the repository's root


def code_version(root: Path = ROOT) -> str:
    """The short commit of HEAD in `root`; "unknown" outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def command(script: str | Path, argv: Sequence[str] = (), env: str = "") -> str:
    """The command line of benchmark `script` (its __file__) with arguments `argv`, the script's path
    relative to the repository root: `[ENV ]python benchmarks/<group>/<name>.py ARGS`."""
    path = Path(script).resolve()
    shown = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return " ".join([*([env] if env else []), "python", shown, *argv])


def process_cpu_seconds() -> float:
    """This process's CPU time so far (user + system), rounded to 0.1 s."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 1)


def load_average() -> float:
    """The machine's one-minute load average now."""
    return os.getloadavg()[0]


def time_report_cpu_seconds(time_file: Path) -> float | None:
    """User + system seconds from GNU `time -v`'s report (None when it holds neither)."""
    text = Path(time_file).read_text()
    found = [float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([0-9.]+)", text)]
    return round(sum(found), 1) if len(found) == 2 else None


def mean_load(load_file: Path) -> float | None:
    """The mean one-minute load average of lines `HH:MM:SS load1 load5 load15 ...` sampled during a run."""
    loads = [float(line.split()[1]) for line in Path(load_file).read_text().splitlines() if len(line.split()) > 1]
    return round(sum(loads) / len(loads), 1) if loads else None
