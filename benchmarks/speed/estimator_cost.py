"""Estimator cost: wall time of each advantage estimator on one training batch.

The issue's budget: `gigpo` on 128 trajectories x 50 steps in <= 20 ms. GRPO on the same
data is the reference (it only needs one number per episode), so the GiGPO/GRPO ratio says
what step-level credit assignment costs on top of it. The GiGPO paper reports anchor
grouping + step advantages at 0.54 s of a 363 s iteration (0.15%).

    python benchmarks/speed/estimator_cost.py            # 16 groups x 8 episodes x 50 steps, 50 repeats
    python benchmarks/speed/estimator_cost.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from agentgym.trajectory import Step, Trajectory
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages

BUDGET_MS = 20.0


def make_batch(groups: int, group_size: int, steps: int, states: int, mixed: bool = False, seed: int = 0) -> list[Trajectory]:
    """Sparse-reward episodes that random-walk over `states` states per task, so anchor groups
    are many and of mixed sizes (revisits within and across episodes), as on ALFWorld."""
    rng = np.random.default_rng(seed)
    trajs = []
    for g in range(groups):
        for e in range(group_size):
            length = int(rng.integers(steps // 2, steps + 1)) if mixed and e % 2 else steps
            success = bool(rng.random() < 0.4)
            walk = rng.integers(0, states, size=length)
            trajs.append(
                Trajectory(
                    task_id=f"task{g}",
                    group_id=f"g{g}",
                    steps=[
                        Step(
                            observation="",
                            anchor=f"{g}:{walk[t]}",
                            action_valid=bool(rng.random() < 0.9),
                            reward=float(success and t == length - 1),
                        )
                        for t in range(length)
                    ],
                    success=success,
                    score=float(success),
                    terminated=success,
                    truncated=not success,
                )
            )
    return trajs


def time_ms(fn, repeats: int) -> tuple[float, float]:
    """Median wall and median CPU milliseconds of fn(). CPU time (this thread only) leaves out
    the time spent waiting for a core, so it stays meaningful on a shared, busy machine."""
    fn()  # warm-up (imports, allocator)
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.thread_time()
        fn()
        cpu.append((time.thread_time() - c0) * 1e3)
        wall.append((time.perf_counter() - w0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--states", type=int, default=30, help="distinct states per task (anchor vocabulary)")
    ap.add_argument("--mixed-lengths", action="store_true", help="half the episodes end early (default: all full length)")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="10 repeats")
    args = ap.parse_args()
    repeats = 10 if args.quick else args.repeats

    trajs = make_batch(args.groups, args.group_size, args.steps, args.states, args.mixed_lengths)
    n_steps = sum(len(t.steps) for t in trajs)
    max_len = max(len(t.steps) for t in trajs)
    values = [np.zeros(len(t.steps), dtype=np.float32) for t in trajs]
    progress = [np.full(len(t.steps), 1.0 / len(t.steps), dtype=np.float32) for t in trajs]
    print(
        f"batch: {len(trajs)} trajectories ({args.groups} groups x {args.group_size}), "
        f"up to {max_len} steps, {n_steps} steps in all; median of {repeats} runs"
    )

    runs = {
        "grpo": dict(),
        "rloo": dict(),
        "loop": dict(),
        "gigpo": dict(),
        "ppo": dict(values=values),
        "spa": dict(progress=progress),
        "spa+values": dict(progress=progress, values=values),
    }
    timings = {}
    for label, kwargs in runs.items():
        cfg = EstimatorConfig(name=label.split("+")[0], invalid_penalty=0.1)
        timings[label] = time_ms(lambda: compute_advantages(trajs, cfg, **kwargs), repeats)

    ref_wall, ref_cpu = timings["grpo"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.1f} on {os.cpu_count()} cores (wall times on a busy machine include waiting for a core)")
    print(f"{'estimator':<12}{'wall ms':>9}{'x grpo':>8}{'cpu ms':>9}{'x grpo':>8}")
    for label, (wall, cpu) in timings.items():
        print(f"{label:<12}{wall:>9.2f}{wall / ref_wall:>8.2f}{cpu:>9.2f}{cpu / ref_cpu:>8.2f}")
    wall, cpu = timings["gigpo"]
    verdict = "within" if wall <= BUDGET_MS else "OVER"
    print(
        f"gigpo: {wall:.2f} ms wall ({cpu:.2f} ms cpu) on {len(trajs)} x {max_len} steps, {verdict} the "
        f"{BUDGET_MS:.0f} ms budget; {wall / ref_wall:.2f}x grpo wall, {cpu / ref_cpu:.2f}x grpo cpu"
    )


if __name__ == "__main__":
    main()
