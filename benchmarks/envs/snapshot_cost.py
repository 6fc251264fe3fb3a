"""What an env snapshot costs, per family: time to take and to restore one, and its size.

For each registered id that implements snapshots, one train task is reset and the first
`--steps` actions of its oracle are played; then, `--repeats` times each (the median is kept):
  * snapshot: `snapshot(env)` plus its JSON (`to_json`), what a file or a queue gets;
  * restore: `Snapshot.from_json` plus `restore(env, ...)`, into the same env;
  * replay: what branching costs without snapshots, `reset` plus replaying the same actions,
    measured in the same run: the reference the ratio restore / replay is against;
  * size: the JSON's bytes.
Times are CPU seconds of this process (time.process_time), which a loaded machine disturbs less
than wall-clock time, and wall-clock seconds (`*_wall_ms`): the SWE sandbox's commands run in
other processes, so only the wall clock sees what replaying them costs (neither snapshot nor
restore starts any). ALFWorld and TextWorld restore by replaying their commands on the engine,
so their restore is close to their replay by construction.

Usage: python benchmarks/envs/snapshot_cost.py [--steps 6] [--repeats 5] [--out docs/snapshot_cost.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import code_version, command  # noqa: E402

import gymnasium as gym

import agentgym
from agentgym.snapshot import Snapshot, restore, snapshot
from agentgym.tasks.protocol import split_tasks
from agentgym.toy import register_counter

CLOCK = time.process_time
SKIP = {"agentgym/WebShop-Browser-v0": "the browser backend refuses snapshots (a live Chromium page)",
        "agentgym/OpenEnv-v0": "the state lives in a remote server, which has no snapshot protocol"}


def _make(env_id: str):
    if env_id == "agentgym/TextWorld-v0":
        from agentgym.envs.textworld.games import game_file
        from agentgym.envs.textworld.tasks import TextWorldTaskSpace

        return gym.make(env_id, game_file=str(game_file(TextWorldTaskSpace("tw-treasure_hunter").split("train")[0])))
    return gym.make(env_id)


def _median_time(fn, repeats: int) -> tuple[float, float]:
    """Median CPU seconds and median wall-clock seconds of `fn`."""
    cpu, wall = [], []
    for _ in range(repeats):
        t, w = CLOCK(), time.perf_counter()
        fn()
        cpu.append(CLOCK() - t)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def measure(env_id: str, steps: int, repeats: int) -> dict:
    env = _make(env_id)
    try:
        task = split_tasks(env.unwrapped.task_space, "train")[0]
        env.reset(seed=0, options={"task": task})
        actions = list(env.unwrapped.task_space.solve(task))[:steps]
        played = []
        for action in actions:
            played.append(action)
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        snap = snapshot(env)
        text = snap.to_json()
        take = _median_time(lambda: snapshot(env).to_json(), repeats)
        back = _median_time(lambda: restore(env, Snapshot.from_json(text)), repeats)

        def replay():
            env.reset(seed=0, options={"task": task})
            for a in played:
                env.step(a)

        again = _median_time(replay, repeats)
        row = {"steps_played": len(played), "bytes": len(text.encode("utf-8"))}
        for name, (cpu, wall) in (("snapshot", take), ("restore", back), ("replay", again)):
            row[f"{name}_ms"], row[f"{name}_wall_ms"] = round(1e3 * cpu, 3), round(1e3 * wall, 3)
        row["restore_over_replay"] = round(back[0] / again[0], 3) if again[0] else None
        row["restore_over_replay_wall"] = round(back[1] / again[1], 3) if again[1] else None
        return row
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="docs/snapshot_cost.json")
    args = ap.parse_args()
    register_counter()
    rows, skipped = {}, dict(SKIP)
    for env_id in sorted(i for i in agentgym.registered_envs() if i.startswith("agentgym/")):
        if env_id in SKIP:
            continue
        if env_id == "agentgym/SWE-v0" and not shutil.which("bwrap"):
            skipped[env_id] = "bubblewrap not installed on the measuring machine"
            continue
        try:
            rows[env_id] = measure(env_id, args.steps, args.repeats)
        except agentgym.AgentGymError as exc:  # a missing extra
            skipped[env_id] = str(exc)
            continue
        print(f"{env_id:38s} " + "  ".join(f"{k} {v}" for k, v in rows[env_id].items()), flush=True)
    version = code_version()
    out = {"command": command(__file__, sys.argv[1:]), "code_version": version,
           "clock": "*_ms: time.process_time (CPU of the measuring process); *_wall_ms: time.perf_counter",
           "python": platform.python_version(), "steps": args.steps, "repeats": args.repeats,
           "envs": rows, "skipped": skipped}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
