"""Household environment throughput, reset latency and rollout-engine overhead.

Prints, measured in this run on one core:
  * household steps/s with valid actions (random admissible commands), for the bare env and
    through gym.make's wrappers; target >= 20,000 steps/s;
  * reset latency (a task seen before, and a fresh one whose layout must be generated);
  * the same steps/s for a TextWorld game played through agentgym's TextWorld adapter
    (agentgym/TextWorld-Custom-v0, the `tw-make custom --world-size 5 --nb-objects 10
    --quest-length 5` settings), its game-generation time, and the ratio household / TextWorld,
    when textworld is installed;
  * rollout-engine overhead per env step with the oracle policy: the time of
    `agentgym.collect(..., OraclePolicy(), executor="inprocess")` minus the time of stepping
    identical envs directly with the same actions, divided by the steps; target <= 50 us.

Usage: python benchmarks/envs/env_throughput.py [--quick] [--steps N]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import gymnasium as gym

import agentgym
from agentgym.envs.household import world as household_world
from agentgym.envs.household.env import HouseholdEnv
from agentgym.policies.scripted import OraclePolicy

ENV_ID = "agentgym/Household-v0"
# CPU seconds of this process: the figures are per core and insensitive to other processes
# sharing the machine (wall-clock timings on a loaded machine swing by 2-5x).
CLOCK = time.process_time


def household_steps_per_s(make_env, tasks, steps: int, segments: int = 5, seed: int = 0,
                          horizon: int = 50) -> tuple[list[float], int]:
    """Steps/s of each of `segments` equal parts of a run of `steps` random valid actions.

    Episodes last at most `horizon` steps and each plays a new task, so most states are met
    for the first time (the per-state caches start cold). Only the step calls are timed, in
    CPU time of this process (`CLOCK`), so other processes on a shared machine do not count."""
    rng = random.Random(seed)
    env = make_env()
    clock = CLOCK
    k, t, episodes = 0, 0, 0
    _, info = env.reset(seed=seed, options={"task": tasks[k]})
    step = env.step
    per_segment = steps // segments
    rates = []
    for _ in range(segments):
        step_time = 0.0
        for _ in range(per_segment):
            actions = info["admissible_actions"]
            action = actions[rng.randrange(len(actions))]
            t0 = clock()
            _, _, terminated, truncated, info = step(action)
            step_time += clock() - t0
            t += 1
            if terminated or truncated or t == horizon:
                t = 0
                k = (k + 1) % len(tasks)
                episodes += 1
                _, info = env.reset(seed=seed, options={"task": tasks[k]})
        rates.append(per_segment / step_time)
    return rates, episodes


def reset_latency_us(tasks, fresh: bool) -> float:
    env = HouseholdEnv()
    if fresh:
        household_world._LAYOUTS.clear()
    else:
        for t in tasks:  # warm the layout cache
            env.reset(options={"task": t})
    t0 = CLOCK()
    for t in tasks:
        env.reset(options={"task": t})
    return (CLOCK() - t0) / len(tasks) * 1e6


def textworld_figures(steps: int, seed: int = 0) -> dict | None:
    """TextWorld through agentgym's own adapter (agentgym/TextWorld-Custom-v0, the `tw-make custom
    --world-size 5 --nb-objects 10 --quest-length 5` settings): game-generation time of a new game
    (wall clock: TextWorld compiles with an external Inform 7 compiler process) and steps/s with
    random admissible commands through gym.make, like the household figure."""
    try:
        import textworld  # noqa: F401
    except ImportError:
        return None
    from agentgym.tasks.spec import TaskSpec

    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        old_cache = os.environ.get("AGENTGYM_CACHE")
        os.environ["AGENTGYM_CACHE"] = tmp  # a cold cache: the first reset generates the game
        try:
            env = gym.make("agentgym/TextWorld-Custom-v0", max_episode_steps=10**9)
            task = TaskSpec("agentgym/TextWorld-Custom-v0",
                            {"challenge": "custom", "world_size": 5, "nb_objects": 10, "quest_length": 5}, seed=1)
            t0 = time.perf_counter()
            _, info = env.reset(options={"task": task})
            figures["generate_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            env.reset(options={"task": task})
            figures["reset_cached_ms"] = (time.perf_counter() - t0) * 1e3
            rng = random.Random(seed)
            step_time, done = 0.0, 0
            while done < steps:
                actions = [a for a in info["admissible_actions"] if a not in ("quit", "restart")]
                t0 = CLOCK()
                _, _, terminated, truncated, info = env.step(actions[rng.randrange(len(actions))])
                step_time += CLOCK() - t0
                done += 1
                if terminated or truncated:
                    _, info = env.reset(options={"task": task})
            env.close()
            figures["steps_per_s"] = done / step_time
        finally:
            if old_cache is None:
                os.environ.pop("AGENTGYM_CACHE", None)
            else:
                os.environ["AGENTGYM_CACHE"] = old_cache
    return figures


def rollout_overhead_us(tasks, group_size: int, repeats: int = 3) -> tuple[float, float, float, int]:
    """(overhead us/step, collect seconds, direct seconds, steps); each time is the best of
    `repeats` runs, so both sides see warm caches and the least interference from other
    processes on the machine."""
    policy = OraclePolicy()
    collect_s = float("inf")
    for _ in range(repeats):
        t0 = CLOCK()
        trajs = agentgym.collect(ENV_ID, tasks, policy, group_size=group_size, executor="inprocess", seed=0)
        collect_s = min(collect_s, CLOCK() - t0)
    assert all(t.success for t in trajs), "the oracle should solve every task"
    episodes = [(t.task, t.seed, [s.action for s in t.steps]) for t in trajs]
    steps = sum(len(a) for _, _, a in episodes)
    # Reference: the same envs, built the same way (gym.make), reset with the same task and
    # seed and stepped with the same actions, without the engine (chat prompts, parsing,
    # policy calls, trajectory records).
    direct_s = float("inf")
    for _ in range(repeats):
        t0 = CLOCK()
        envs = [gym.make(ENV_ID) for _ in episodes]
        for env, (task, seed, _) in zip(envs, episodes):
            env.reset(seed=seed, options={"task": task})
        for env, (_, _, actions) in zip(envs, episodes):
            for a in actions:
                env.step(a)
        direct_s = min(direct_s, CLOCK() - t0)
    return (collect_s - direct_s) / steps * 1e6, collect_s, direct_s, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (a few seconds)")
    ap.add_argument("--steps", type=int, default=None, help="household steps to time (default 50,000; quick 10,000)")
    args = ap.parse_args()
    steps = args.steps or (10_000 if args.quick else 50_000)
    tw_steps = 300 if args.quick else 2_000
    space = HouseholdEnv.task_space
    tasks = space.split("train")
    print(f"timing in CPU seconds of this process; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    household_world._LAYOUTS.clear()  # cold caches for both runs: they play different tasks
    bare, episodes = household_steps_per_s(HouseholdEnv, tasks, steps)
    wrapped, _ = household_steps_per_s(lambda: gym.make(ENV_ID), tasks[::-1], steps)
    for label, rates in ((f"bare env, {steps:,} random valid steps, {episodes} episodes", bare),
                         ("through gym.make's wrappers, same", wrapped)):
        print(f"household steps/s ({label}): median of 5 segments {statistics.median(rates):,.0f} "
              f"(range {min(rates):,.0f}-{max(rates):,.0f})")
    print(f"household target >= 20,000 steps/s (gym.make, median): "
          f"{'met' if statistics.median(wrapped) >= 20_000 else 'MISSED'}")
    sample = tasks[:500]
    print(f"household reset latency: {reset_latency_us(sample, fresh=False):.1f} us (seen task), "
          f"{reset_latency_us(sample, fresh=True):.1f} us (new task, layout generated)")

    tw = textworld_figures(tw_steps)
    if tw is None:
        print("textworld not installed (pip install 'agentgym-credit[textworld]'): no reference figure")
    else:
        print(f"textworld game generation (agentgym/TextWorld-Custom-v0, world size 5, 10 objects, quest length 5): "
              f"{tw['generate_s']:.2f} s wall for a new game, {tw['reset_cached_ms']:.1f} ms reset of a cached one")
        print(f"textworld steps/s (same game through gym.make, {tw_steps} random admissible steps): "
              f"{tw['steps_per_s']:,.0f}")
        print(f"ratio household/textworld: {statistics.median(wrapped) / tw['steps_per_s']:,.0f}x "
              "(both through gym.make, with admissible commands and state anchors)")

    n_tasks, group = (10, 4) if args.quick else (40, 8)
    overhead, collect_s, direct_s, n = rollout_overhead_us(space.split("heldout")[:n_tasks], group)
    print(f"rollout: collect {collect_s * 1e3:.1f} ms, direct env stepping {direct_s * 1e3:.1f} ms, {n} steps "
          f"({n_tasks} tasks x {group} episodes, oracle policy, in-process)")
    print(f"rollout-engine overhead per env step: {overhead:.1f} us  [target <= 50: "
          f"{'met' if overhead <= 50 else 'MISSED'}]")


if __name__ == "__main__":
    main()
