"""Household <-> ALFWorld parity: the household oracle's commands replayed in ALFWorld's engine.

For each household task (envs/alfworld/household.py converts it to an ALFWorld game with the
same names), the household oracle's plan is executed in both engines side by side. Counted:

* parity: every command of the plan is admissible in ALFWorld and ALFWorld reports the win
  after the last one (household's own success is checked too);
* observation differences per step, classified: `order` (the same listed items in another
  order), `other` (anything else, with examples);
* admissible-command differences per step: `help` (ALFWorld also offers "help"), `other`.

Usage: python benchmarks/envs/alfworld_parity.py [--split heldout] [--n 300] [--out docs/alfworld_parity.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import time
from pathlib import Path

from agentgym.envs.alfworld.engine import Engine
from agentgym.envs.alfworld.household import household_game
from agentgym.envs.household.env import HouseholdEnv
from agentgym.registration import get_task_space

_BANNER = re.compile(r"^\s*-= Welcome to TextWorld, ALFRED! =-\s*")
_ITEM = re.compile(r"\ban? ([a-z]+ \d+)")


def classify(h: str, a: str) -> str | None:
    """None when equal; "order" when the texts list the same things in another order."""
    if h == a:
        return None
    if sorted(_ITEM.findall(h)) == sorted(_ITEM.findall(a)) and _ITEM.sub("#", h) == _ITEM.sub("#", a):
        return "order"
    return "other"


def parity(split: str, n: int) -> dict:
    space = get_task_space("agentgym/Household-v0")
    tasks = space.split(split)[:n]
    engine, env = Engine(fast=True), HouseholdEnv()
    obs_kinds, adm_kinds = collections.Counter(), collections.Counter()
    examples: dict[str, list] = collections.defaultdict(list)
    per_type = collections.defaultdict(lambda: [0, 0])
    same, steps, failures = 0, 0, []
    for spec in tasks:
        game, _ = household_game(spec)
        engine.load(game)
        state = engine.reset()
        h_obs, h_info = env.reset(options={"task": spec})
        pairs = [(h_obs, _BANNER.sub("", state.feedback).strip(), "reset")]
        adm = [(h_info["admissible_actions"], state["admissible_commands"])]
        ok = True
        for command in space.solve(spec):
            if command not in state["admissible_commands"]:
                ok = False
                failures.append({"task": spec.task_id, "command": command})
                break
            state = engine.step(command)
            h_obs, _, _, _, h_info = env.step(command)
            pairs.append((h_obs, state.feedback.strip(), command.split(" ")[0]))
            adm.append((h_info["admissible_actions"], state["admissible_commands"]))
        won = ok and bool(state["won"]) and bool(h_info["success"])
        same += won
        per_type[spec.params["task_type"]][0] += won
        per_type[spec.params["task_type"]][1] += 1
        for h, a, verb in pairs:
            steps += 1
            kind = classify(h, a)
            if kind:
                obs_kinds[f"{kind}/{verb}"] += 1
                if len(examples[kind]) < 3:
                    examples[kind].append({"household": h, "alfworld": a})
        for h, a in adm:
            extra = set(a) - set(h)
            if set(h) != set(a):
                adm_kinds["help" if extra == {"help"} and set(h) <= set(a) else "other"] += 1
                if not (extra == {"help"} and set(h) <= set(a)) and len(examples["admissible"]) < 3:
                    examples["admissible"].append({"only_household": sorted(set(h) - set(a))[:5],
                                                   "only_alfworld": sorted(extra)[:5]})
    return {"split": split, "tasks": len(tasks), "parity": round(same / max(1, len(tasks)), 4),
            "parity_by_type": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_type.items())},
            "observations_compared": steps, "observation_differences": dict(obs_kinds),
            "admissible_differences": dict(adm_kinds), "failures": failures[:5], "examples": examples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="heldout")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t = time.time()
    report = parity(args.split, args.n)
    report["seconds"] = round(time.time() - t)
    print(json.dumps({k: v for k, v in report.items() if k != "examples"}))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
