"""The household task space: sampling, mutation, the oracle, categories and the shipped splits.

A task's params name its goal (task_type, room, object, receptacle or lamp) and its difficulty
knobs (num_receptacles, num_distractors, closed_fraction, goal_visible); the seed lays out the
room. Goal combinations (object, receptacle or lamp) are split in two by a fixed hash: ~15% are
reserved for the `heldout_unseen` split and never sampled for training, so heldout_unseen
tests generalization to (object, receptacle, room) combinations never seen in train.

Run `python -m agentgym.envs.household.tasks` to regenerate the split manifests.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.household.catalog import TASK_TYPES, objects_for, rooms_for, targets_for
from agentgym.envs.household.oracle import IDLE_COMMANDS, plan_for
from agentgym.envs.household.world import check_params, get_layout
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.generation import parse_json
from agentgym.tasks.validation import make_env
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split
from agentgym.envs.household.world import DEFAULTS

ENV_ID = "agentgym/Household-v0"
LEVELS = ("easy", "medium", "hard")
# Knob ranges per level: (num_receptacles, num_distractors, closed_fraction choices, goal_visible)
LEVEL_KNOBS = {
    "easy": ((3, 4), (0, 1), (0.0,), (True,)),
    "medium": ((5, 8), (2, 5), (0.25, 0.5), (True,)),
    "hard": ((9, 16), (6, 12), (0.5, 0.75, 1.0), (False,)),
}
SPLIT_SIZES = {"train": 2000, "heldout": 300, "heldout_unseen": 300}
_SPLIT_SEEDS = {"train": 11, "heldout": 22, "heldout_unseen": 33}
# `heldout` ends with a block of easy pick_and_place / look_at_obj_in_light tasks, so that the main
# job (`agentgym train household-tiny`) is evaluated on >= 200 tasks of its own categories: 34 of
# them in the balanced 300 detect only a 16-20 point change at 80% power.
HELDOUT_EASY_EXTRA = 200
_HELDOUT_EASY_SEED = 44
_UNSEEN_PERCENT = 15


def is_reserved(obj: str, target: str) -> bool:
    """Whether the (object, receptacle-or-lamp) pair belongs to heldout_unseen (a fixed hash,
    so every machine and version agrees)."""
    digest = hashlib.sha256(f"household|{obj}|{target}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 100 < _UNSEEN_PERCENT


@functools.lru_cache(maxsize=None)  # pure and hot: every sample() filters these
def goal_combos(task_type: str, unseen: bool | None = False) -> tuple[tuple[str, str, str], ...]:
    """(room, object, target) goals of a task type; unseen=True only reserved pairs, False only
    the others, None all."""
    out = []
    for room in rooms_for(task_type):
        for obj in objects_for(task_type, room):
            for target in targets_for(task_type, room):
                if unseen is None or is_reserved(obj, target) == unseen:
                    out.append((room, obj, target))
    return tuple(out)


def combo_of(spec: TaskSpec) -> tuple[str, str, str]:
    p = spec.params
    return (p["room"], p["object"], p.get("lamp") or p.get("receptacle"))


def difficulty(params: dict) -> float:
    """One number for how hard a layout is: more places to search, more clutter, more closed
    containers and a hidden goal object all add to it."""
    p = check_params(params)
    return ((p["num_receptacles"] - 3) / 13 + p["num_distractors"] / 12 + p["closed_fraction"]
            + (0.0 if p["goal_visible"] else 0.5))


def bucket(params: dict) -> str:
    d = difficulty(params)
    return "easy" if d < 0.5 else "medium" if d < 1.5 else "hard"


def _target_key(task_type: str) -> str:
    return "lamp" if task_type == "look_at_obj_in_light" else "receptacle"


class HouseholdTaskSpace(TaskSpace):
    """Household tasks in the style of ALFWorld. params: task_type (pick_and_place,
    look_at_obj_in_light, pick_clean_then_place, pick_heat_then_place, pick_cool_then_place,
    pick_two_obj_and_place), room (kitchen, livingroom, bedroom, bathroom), object (goal object
    type, e.g. "apple"), receptacle (destination type, e.g. "fridge") or lamp (desklamp or
    floorlamp, for look tasks), and difficulty knobs num_receptacles (3-16), num_distractors
    (0-12), closed_fraction (0-1, share of containers that start closed), goal_visible (the goal
    object starts in an open place). Example instructions: "put a clean apple in fridge.",
    "look at book under the desklamp.", "put two cellphone on sofa."."""

    idle_commands = IDLE_COMMANDS  # look / inventory / examine: the credit diagnostics' idle steps

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"

    # --- sampling ---------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, **difficulty: Any) -> TaskSpec:
        """A random task. Keywords fix any param (task_type, room, object, receptacle, lamp,
        num_receptacles, ...), `level` (easy/medium/hard) draws the knobs from that level's
        ranges, and `unseen` picks reserved goal combinations (True), others (False, the
        default, what training uses) or any (None)."""
        return self._sample(random.Random(int(rng.integers(2**63))), **difficulty)

    def _sample(self, r: random.Random, *, task_type: str | None = None, level: str | None = None,
                unseen: bool | None = False, seed: int | None = None, **fixed: Any) -> TaskSpec:
        if task_type is None:
            task_type = r.choice(TASK_TYPES)
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task_type!r}")
        tkey = _target_key(task_type)
        combos = goal_combos(task_type, unseen)
        if "room" in fixed or "object" in fixed or tkey in fixed:  # else every goal: skip the copy (hot)
            combos = [c for c in combos if fixed.get("room", c[0]) == c[0] and fixed.get("object", c[1]) == c[1]
                      and fixed.get(tkey, c[2]) == c[2]]
        if not combos:
            raise ValueError(f"no {task_type} goal matches {fixed} (unseen={unseen})")
        room, obj, target = r.choice(combos)
        if level is None:
            level = r.choice(LEVELS)
        if level not in LEVEL_KNOBS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
        (r_lo, r_hi), (d_lo, d_hi), closed, visible = LEVEL_KNOBS[level]
        params = {
            "task_type": task_type, "room": room, "object": obj, tkey: target,
            "num_receptacles": r.randint(r_lo, r_hi),
            "num_distractors": r.randint(d_lo, d_hi),
            "closed_fraction": r.choice(closed),
            "goal_visible": r.choice(visible),
        }
        for knob in ("num_receptacles", "num_distractors", "closed_fraction", "goal_visible"):
            if knob in fixed:
                params[knob] = fixed[knob]
        unknown = set(fixed) - set(params)
        if unknown:
            raise ValueError(f"unknown household task params {sorted(unknown)}")
        check_params(params)
        return TaskSpec(self.env_id, params=params, seed=r.randrange(2**31) if seed is None else seed)

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """A nearby task: a new layout seed, one difficulty knob moved one notch, or another goal
        object / destination of the same task type. Stays on the same side of the
        seen/unseen combination split as `spec`."""
        r = random.Random(int(rng.integers(2**63)))
        p = check_params(spec.params)
        unseen = is_reserved(p["object"], p[_target_key(p["task_type"])])
        for _ in range(50):
            q = dict(p)
            kind = r.choice(("seed", "receptacles", "distractors", "closed", "visible", "object", "target"))
            seed = r.randrange(2**31) if kind == "seed" else spec.seed
            if kind == "receptacles":
                q["num_receptacles"] = p["num_receptacles"] + r.choice((-2, -1, 1, 2))
            elif kind == "distractors":
                q["num_distractors"] = p["num_distractors"] + r.choice((-2, -1, 1, 2))
            elif kind == "closed":
                q["closed_fraction"] = min(1.0, max(0.0, p["closed_fraction"] + r.choice((-0.25, 0.25))))
            elif kind == "visible":
                q["goal_visible"] = not p["goal_visible"]
            elif kind == "object":
                q["object"] = r.choice(objects_for(p["task_type"], p["room"]))
            elif kind == "target":
                tkey = _target_key(p["task_type"])
                q[tkey] = r.choice(targets_for(p["task_type"], p["room"]))
            try:
                check_params(q)
            except ValueError:
                continue
            if is_reserved(q["object"], q[_target_key(q["task_type"])]) != unseen:
                continue
            candidate = TaskSpec(self.env_id, params=q, seed=seed)
            if candidate != spec:
                return candidate
        return TaskSpec(self.env_id, params=p, seed=r.randrange(2**31))

    # --- oracle, verifier, categories -------------------------------------------------------
    def solve(self, spec: TaskSpec) -> list[str]:
        layout = get_layout(spec)
        if layout.plan is None:
            layout.plan = plan_for(layout)
        return list(layout.plan)

    def solve_searching(self, spec: TaskSpec, rng: np.random.Generator, dawdle_prob: float = 0.0) -> list[str]:
        """A plan of an agent that does not know where objects are: it searches unseen receptacles
        in an order drawn from `rng` until it sees what it needs (a new order per call). With
        `dawdle_prob`, before each command it idles (look / inventory / examine) with that
        probability: an imperfect demonstrator."""
        return plan_for(get_layout(spec), search_rng=rng, dawdle_prob=dawdle_prob)

    def meta_tag(self, action: str, earlier: list[str] | tuple[str, ...]) -> str:
        """The RLVMR tag of a demonstrator's valid command by what it does (sft.tags), `earlier`
        being the episode's valid commands before it: explore for going to or opening a receptacle
        for the first time (a new place, contents not seen yet), monitor for a command that changes
        nothing (look, inventory, examine: what the dawdling expert idles with), planning for the
        rest (take, move, treat, use, and going back to a known place: steps of the plan)."""
        if action.startswith(IDLE_COMMANDS):
            return "monitor"
        if action.startswith(("go to ", "open ")) and action not in earlier:
            return "explore"
        return "planning"

    def validate(self, spec: TaskSpec) -> bool:
        """The oracle's plan, replayed in a fresh env, solves the task (a bare env, no gym.make
        per call: the generator validates thousands of proposals)."""
        try:
            plan = self.solve(spec)
            env = make_env(self)
            _, info = env.reset(options={"task": spec})
            for action in plan:
                _, _, terminated, _, info = env.step(action)
                if terminated:
                    break
            return bool(info["success"]) and all(isinstance(a, str) for a in plan)
        except (ValueError, KeyError, TypeError, RuntimeError):
            return False

    def category(self, spec: TaskSpec) -> str:
        return f"{spec.params['task_type']}/{bucket(spec.params)}"

    def difficulty(self, spec: TaskSpec) -> float:
        """Used by the task generator to make easier / harder variants."""
        return difficulty(spec.params)

    def check_params(self, params: dict) -> dict:
        """Every knob filled in and typed (closed_fraction a float), unknown keys refused."""

        allowed = {"task_type", "room", "object", "receptacle", "lamp", *DEFAULTS}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ValueError(f"unknown keys {unknown}; household params take {sorted(allowed)}")
        p = check_params(params)
        p["closed_fraction"] = float(p["closed_fraction"])
        return p

    def reserved(self, spec: TaskSpec) -> bool:
        """Whether the task's (object, destination) pair is kept for heldout_unseen: the generator
        refuses such proposals, whatever their id."""
        p = spec.params
        return is_reserved(p.get("object"), p.get("lamp") or p.get("receptacle"))

    # --- text proposals ---------------------------------------------------------------------
    _PATTERNS = (
        ("pick_clean_then_place", r"(?:put a clean (\w+)|clean some (\w+) and put it) (?:in|on) (\w+)"),
        ("pick_heat_then_place", r"(?:put a hot (\w+)|heat some (\w+) and put it) (?:in|on) (\w+)"),
        ("pick_cool_then_place", r"(?:put a cool (\w+)|cool some (\w+) and put it) (?:in|on) (\w+)"),
        ("pick_two_obj_and_place", r"(?:put two (\w+)|find two (\w+) and put them) (?:in|on) (\w+)"),
        ("look_at_obj_in_light", r"(?:look at (\w+) under|examine the (\w+) with) the (\w+)"),
        ("pick_and_place", r"put (?:a|some) (\w+) (?:in|on) (\w+)"),
    )

    def parse(self, text: str) -> TaskSpec | None:
        """A JSON {"params": ..., "seed": ...} proposal, or an instruction in words ("put a hot
        apple in fridge.", optionally followed by knobs such as "level=hard" or
        "num_receptacles=5"); None when it names no valid task."""
        if not isinstance(text, str):
            return None
        spec = parse_json(self, text)
        if spec is not None:
            try:
                check_params(spec.params)
                return spec
            except ValueError:
                return None
        lowered = " ".join(text.lower().split())
        for task_type, pattern in self._PATTERNS:
            match = re.search(pattern, lowered)
            if not match:
                continue
            groups = [g for g in match.groups() if g]
            obj, target = groups[0], groups[-1]
            knobs: dict[str, Any] = {}
            for name, value in re.findall(r"(\w+)\s*=\s*([\w.]+)", lowered):
                try:
                    knobs[name] = json.loads(value)
                except ValueError:
                    knobs[name] = value
            seed = knobs.pop("seed", None)
            try:
                return self._sample(random.Random(lowered), task_type=task_type, object=obj,
                                    unseen=None, seed=seed if isinstance(seed, int) else None,
                                    **{_target_key(task_type): target}, **knobs)
            except (ValueError, TypeError):
                return None
        return None

    # --- splits -----------------------------------------------------------------------------
    def build_splits(self) -> dict[str, list[TaskSpec]]:
        """train / heldout from the seen goal combinations, heldout_unseen from the reserved ones;
        every task type and level equally often; ids unique across splits."""
        taken: set[str] = set()
        splits = {}
        for name, size in SPLIT_SIZES.items():
            r = random.Random(_SPLIT_SEEDS[name])
            tasks: list[TaskSpec] = []
            i = 0
            while len(tasks) < size:
                spec = self._sample(r, task_type=TASK_TYPES[i % len(TASK_TYPES)],
                                    level=LEVELS[(i // len(TASK_TYPES)) % len(LEVELS)],
                                    unseen=(name == "heldout_unseen"))
                i += 1
                if spec.task_id not in taken:
                    taken.add(spec.task_id)
                    tasks.append(spec)
            if name == "heldout":
                r = random.Random(_HELDOUT_EASY_SEED)
                extra = 0
                while extra < HELDOUT_EASY_EXTRA:
                    spec = self._sample(r, task_type=("pick_and_place", "look_at_obj_in_light")[extra % 2],
                                        level="easy", unseen=False)
                    if spec.task_id not in taken:
                        taken.add(spec.task_id)
                        tasks.append(spec)
                        extra += 1
            splits[name] = tasks
        return splits

    def write_splits(self, folder: Path | None = None) -> dict[str, int]:
        folder = Path(folder or self.split_dir)
        splits = self.build_splits()
        for name, tasks in splits.items():
            save_split(folder / f"{name}.jsonl", tasks)
        return {name: len(tasks) for name, tasks in splits.items()}


if __name__ == "__main__":
    print(HouseholdTaskSpace().write_splits())
