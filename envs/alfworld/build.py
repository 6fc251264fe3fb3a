"""Build the shipped ALFWorld-v0 splits: `python -m agentgym.envs.alfworld.build [--train N]
[--heldout N] [--unseen N]` (games per task type and split); `--verify` instead plays every
game of the shipped splits through ALFWorldEnv with the oracle and counts its wins.

Every candidate game is generated, solved by the planner and replayed (games.check_game) into
the game cache ($AGENTGYM_CACHE/alfworld, ~70 kB a game), so the build is resumable: a rerun
takes built games from the cache and skips candidates already rejected (rejected.txt there),
and reaches the same splits, since candidates are drawn from fixed seeds.
"""

from __future__ import annotations

import argparse
import json
import time

from agentgym.envs.alfworld import games
from agentgym.envs.alfworld.tasks import SPLIT_DIR, ALFWorldTaskSpace
from agentgym.tasks.splits import save_split
from agentgym.tasks.validation import canonical
from agentgym.envs.alfworld.env import ALFWorldEnv


class _ResumableSpace(ALFWorldTaskSpace):
    """validate() that remembers rejected games across runs."""

    def __init__(self):
        self._rejects_path = games.cache_dir() / "rejected.txt"
        self._rejects = set(self._rejects_path.read_text().split()) if self._rejects_path.is_file() else set()
        self.reasons: dict[str, int] = {}

    def validate(self, spec) -> bool:
        key = games.game_key(dict(spec.params), spec.seed)
        if key in self._rejects:
            return False
        try:
            self.game_dir(canonical(self, spec))
            return True
        except games.GameError as exc:
            reason = str(exc).split(":")[0]
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
            self._rejects.add(key)
            self._rejects_path.parent.mkdir(parents=True, exist_ok=True)
            with self._rejects_path.open("a") as f:
                f.write(key + "\n")
            return False


def verify() -> dict:
    """The oracle (each game's walkthrough) played through ALFWorldEnv on every shipped game."""

    env, space = ALFWorldEnv(), ALFWorldTaskSpace()
    out: dict = {}
    t0 = time.time()
    for name in space.split_names:
        for spec in space.split(name):
            _, info = env.reset(options={"task": spec})
            for action in space.solve(spec):
                _, _, terminated, _, info = env.step(action)
            row = out.setdefault(f"{name}/{spec.params['task_type']}", [0, 0])
            row[0] += bool(terminated and info["success"])
            row[1] += 1
    env.close()
    return {"solved": {k: f"{v[0]}/{v[1]}" for k, v in sorted(out.items())},
            "total": f"{sum(v[0] for v in out.values())}/{sum(v[1] for v in out.values())}",
            "seconds": round(time.time() - t0)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=160)
    ap.add_argument("--heldout", type=int, default=20)
    ap.add_argument("--unseen", type=int, default=20)
    ap.add_argument("--out", default=str(SPLIT_DIR))
    ap.add_argument("--verify", action="store_true", help="play the oracle on every shipped game instead")
    args = ap.parse_args(argv)
    if args.verify:
        print(json.dumps(verify()))
        return
    space = _ResumableSpace()
    t0 = time.time()
    splits = space.build_splits({"heldout_unseen": args.unseen, "heldout": args.heldout, "train": args.train},
                                log=lambda m: print(f"[{time.time() - t0:7.0f} s] {m}", flush=True))
    for name, tasks in splits.items():
        save_split(f"{args.out}/{name}.jsonl", tasks)
    print(json.dumps({"counts": {k: len(v) for k, v in splits.items()}, "rejected": space.reasons,
                      "seconds": round(time.time() - t0)}))


if __name__ == "__main__":
    main()
