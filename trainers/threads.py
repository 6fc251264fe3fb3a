"""How many CPU threads torch uses: a number, or `auto` (the cores this process may use, less the
ones other processes keep busy), so a preset written for an idle 2-core box does not run two
threads on a core another job is using (each thread then waits for the other at every matmul)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota when one is set."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def auto_threads(cores: int | None = None, load: float | None = None) -> int:
    """`torch_threads: auto`: the usable cores less those the machine's 1-minute load average says
    are busy, at least 1."""
    cores = usable_cores() if cores is None else cores
    load = os.getloadavg()[0] if load is None else load
    return max(1, min(cores, cores - int(load + 0.5)))


def set_torch_threads(setting: int | str | None, log: Callable[[str], None]) -> int | None:
    """Apply the config's torch_threads (None: torch's default); returns the count set. The count
    `auto` chose is logged: results can differ with the thread count (the order of sums in a matmul
    changes), so a run to be repeated exactly names it."""
    if setting is None:
        return None
    import torch

    threads = auto_threads() if setting == "auto" else int(setting)
    if setting == "auto":
        log(f"torch_threads=auto: {threads} thread(s) ({usable_cores()} usable cores, load "
            f"{os.getloadavg()[0]:.1f}); torch_threads={threads} repeats this run exactly")
    torch.set_num_threads(threads)
    return threads
