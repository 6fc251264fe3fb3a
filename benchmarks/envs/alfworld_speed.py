"""ALFWorld-v0 speed, stock engine against ours, beside household; and a hostile-action run.

Measured in one run, in CPU seconds of this process (time.process_time: the figures are per
core and hardly move with other processes on a shared machine):

* steps/s with random admissible commands, over one game of each task type (fixed seeds), for
  agentgym/ALFWorld-v0 with `fast=False` (ALFWorld's engine as alfworld runs it: TextWorld's
  PddlEnv + AlfredDemangler + AlfredInfos) and `fast=True` (ours: same texts, engine.py), and
  for agentgym/Household-v0 on the same number of its own train tasks;
* reset seconds: the first reset of a game in the env (load; ours reads the PDDL -> SAS
  translation the build cached, the `cold` row translates again) and a reset of the game just
  played (what GRPO groups do);
* with --hostile N: N steps of benchmarks/robustness/hostile.py's hostile actions on ALFWorld-v0
  (exceptions, info dicts missing keys, fds / child processes left).

Usage: python benchmarks/envs/alfworld_speed.py [--steps 150] [--hostile 5000] [--out docs/alfworld_speed.json]
Games are built into the cache on first use (`python -m agentgym.envs.alfworld.build` builds
them all).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import agentgym  # noqa: F401
from agentgym.envs.alfworld import scenes

CLOCK = time.process_time
ROOT = Path(__file__).resolve().parents[2]


def one_game_per_type(space):
    """One training-side game of each task type, drawn from fixed seeds (the same every run)."""
    return [space.sample(np.random.default_rng(k), task_type=tt) for k, tt in enumerate(scenes.TASK_TYPES)]


def _forget(space, task) -> None:
    """Make the next load of `task` translate its PDDL again (memory and disk caches emptied)."""
    from agentgym.envs.alfworld import engine, games

    data = games.load_game(space.game_dir(task) / games.GAME_FILE)
    engine.sas_path(data["pddl_domain"], data["pddl_problem"]).unlink(missing_ok=True)
    engine.forget_translations()


def measure(env_id: str, tasks, steps_per_task: int, seed: int = 0, cold: bool = False, **kwargs) -> dict:
    """Steps/s over random admissible commands, first-reset and repeat-reset seconds; `cold`:
    every first reset of a game translates its PDDL (no cached translation)."""
    rng = random.Random(seed)
    env = gym.make(env_id, **kwargs).unwrapped
    first, again, step_time, steps = [], [], 0.0, 0
    try:
        for task in tasks:
            if cold:
                _forget(env.task_space, task)
            t = CLOCK()
            _, info = env.reset(options={"task": task})
            first.append(CLOCK() - t)
            done = 0
            while done < steps_per_task:
                actions = info["admissible_actions"]
                action = actions[rng.randrange(len(actions))]
                t = CLOCK()
                _, _, terminated, truncated, info = env.step(action)
                step_time += CLOCK() - t
                done += 1
                if terminated or truncated:
                    t = CLOCK()
                    _, info = env.reset(options={"task": task})
                    again.append(CLOCK() - t)
            t = CLOCK()
            env.reset(options={"task": task})
            again.append(CLOCK() - t)
            steps += done
    finally:
        env.close()
    return {"env": env_id, **{k: v for k, v in kwargs.items()}, **({"translation": "cold"} if cold else {}),
            "tasks": len(tasks), "steps": steps, "steps_per_s": round(steps / step_time, 1),
            "first_reset_s": round(statistics.mean(first), 5), "repeat_reset_s": round(statistics.mean(again), 5)}


def _hostile_module():
    spec = importlib.util.spec_from_file_location("hostile", ROOT / "benchmarks" / "robustness" / "hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150, help="random admissible steps per game")
    ap.add_argument("--stock-steps", type=int, default=None, help="steps per game for the stock engine (default --steps)")
    ap.add_argument("--hostile", type=int, default=0, help="hostile-action steps on ALFWorld-v0 (0: skip)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from agentgym.registration import get_task_space

    alf = get_task_space("agentgym/ALFWorld-v0")
    games = one_game_per_type(alf)
    for spec in games:  # build outside the timings
        alf.game_dir(spec)
    rooms = [len(scenes.floorplan(t.params["floorplan"]).receptacles) for t in games]
    household = get_task_space("agentgym/Household-v0").split("train")[:len(games)]
    rows = [
        measure("agentgym/ALFWorld-v0", games, args.stock_steps or args.steps, fast=False),
        measure("agentgym/ALFWorld-v0", games, args.steps, fast=True),
        measure("agentgym/ALFWorld-v0", games, 20, cold=True, fast=True),
        measure("agentgym/Household-v0", household, args.steps),
    ]
    stock, ours = rows[0], rows[1]
    report = {"receptacles_per_game": rooms, "rows": rows,
              "speedup_steps": round(ours["steps_per_s"] / stock["steps_per_s"], 2),
              "speedup_first_reset": round(stock["first_reset_s"] / ours["first_reset_s"], 2),
              "speedup_repeat_reset": round(stock["repeat_reset_s"] / ours["repeat_reset_s"], 2)}
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.hostile:
        report["hostile"] = _hostile_module().hostile_steps("agentgym/ALFWorld-v0", args.hostile)
        print(json.dumps(report["hostile"]), flush=True)
    print(json.dumps({k: v for k, v in report.items() if k.startswith("speedup") or k == "receptacles_per_game"}))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
