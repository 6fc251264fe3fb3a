"""SWE sandbox figures: bwrap command round trip, reset, full oracle episode; `local` (no
isolation) measured in the same run as the reference, reported as ratios.

    python benchmarks/envs/swe_sandbox.py           # 200 round trips, 30 resets, 6 episodes
    python benchmarks/envs/swe_sandbox.py --quick   # 40 / 10 / 2
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.repos import repo_path
from agentgym.envs.swe.sandbox import make_sandbox
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.workspace import fresh_copy, remove_workspace


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


CPU_MS: dict[str, float] = {}


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def round_trips(backend: str, n: int) -> list[float]:
    ws = fresh_copy(repo_path("datekit"))
    try:
        sb = make_sandbox(backend, ws)
        sb.run("true")  # warm caches
        out = []
        cpu0 = _cpu()
        for _ in range(n):
            t = time.perf_counter()
            res = sb.run("echo ok")
            out.append(time.perf_counter() - t)
            assert res.output.strip() == "ok", res.output
        # CPU time spent per command (ours + children): what the wall clock would be on an idle
        # core, whatever else the machine is doing
        CPU_MS[backend] = (_cpu() - cpu0) / n * 1e3
        return out
    finally:
        remove_workspace(ws)


def resets(backend: str, tasks, n: int) -> list[float]:
    env = SWEEnv(backend=backend)
    out = []
    for i in range(n):
        t = time.perf_counter()
        env.reset(options={"task": tasks[i % len(tasks)]})
        out.append(time.perf_counter() - t)
    env.close()
    return out


def episodes(backend: str, space, tasks, n: int) -> list[float]:
    env = SWEEnv(backend=backend)
    out = []
    for task in tasks[:n]:
        t = time.perf_counter()
        env.reset(options={"task": task})
        for action in space.solve(task):
            *_, info = env.step(action)
        out.append(time.perf_counter() - t)
        assert info["success"], task.task_id
    env.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_cmd, n_reset, n_ep = (40, 10, 2) if args.quick else (200, 30, 6)
    space = SWETaskSpace()
    tasks = space.split("train")[::7]

    rows = []
    for name, fn in [
        ("command round trip", lambda b: round_trips(b, n_cmd)),
        ("reset (fresh repo copy)", lambda b: resets(b, tasks, n_reset)),
        ("oracle episode (edit + hidden tests)", lambda b: episodes(b, space, tasks, n_ep)),
    ]:
        bw = fn("bwrap")
        lo = fn("local")
        rows.append((name, bw, lo))

    print(f"{'figure':40s} {'bwrap median':>13s} {'bwrap p95':>10s} {'local median':>13s} {'local p95':>10s} {'ratio':>7s}")
    for name, bw, lo in rows:
        mb, ml = statistics.median(bw), statistics.median(lo)
        print(f"{name:40s} {mb * 1e3:10.1f} ms {pct(bw, .95) * 1e3:7.1f} ms {ml * 1e3:10.1f} ms "
              f"{pct(lo, .95) * 1e3:7.1f} ms {mb / ml:6.2f}x")
    print(f"CPU time per round trip: bwrap {CPU_MS['bwrap']:.1f} ms, local {CPU_MS['local']:.1f} ms "
          f"({CPU_MS['bwrap'] / CPU_MS['local']:.2f}x)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("targets: bwrap round trip <= 20 ms, reset <= 100 ms")


if __name__ == "__main__":
    main()
