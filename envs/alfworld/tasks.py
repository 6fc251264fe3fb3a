"""Task spaces of agentgym/ALFWorld-v0: our generated games, or the official ones a user has.

Generated games (ALFWorldTaskSpace): params task_type (ALFWorld's six), floorplan (one of the
120 shipped), object (goal object type, ALFRED's spelling: "Apple") and target (destination
receptacle type, or the lamp type for look_at_obj_in_light); the seed places the objects. The
shipped splits (splits/*.jsonl) list games that were generated and checked: the planner
solved each, and its plan, replayed in the engine, won. `heldout_unseen` plays only ALFRED's
test floor plans (1-6, 201-206, 301-306, 401-406), which train and heldout never use and the
task generator refuses (`reserved`); train and heldout are disjoint games on the other 96.

Official games (OfficialTaskSpace, `data_path=`): every `<dir>/game.tw-pddl` under the
folder, with ALFWorld's splits as ours: train -> train, valid_seen -> heldout, valid_unseen ->
heldout_unseen. Params {"game": "<path relative to data_path>"}, so ids do not depend on where
the data lives. Like alfworld's loader, "movable" and "Sliced" games and games marked
unsolvable are left out.

Run `python -m agentgym.envs.alfworld.build` to (re)build the shipped splits (resumable).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.alfworld import games, scenes, searching
from agentgym.errors import ConfigError
from agentgym.tasks.space import TaskSpace, check_schema
from agentgym.tasks.validation import canonical
from agentgym.tasks.spec import TaskSpec
from agentgym.envs.alfworld.engine import Engine

ENV_ID = "agentgym/ALFWorld-v0"
SPLIT_DIR = Path(__file__).parent / "splits"
OFFICIAL_SPLITS = {"train": "train", "valid_seen": "heldout", "valid_unseen": "heldout_unseen"}
# Sub-goals a task type adds to "find it, put it there" (a second object, an appliance, a lamp).
TYPE_STEPS = {"pick_and_place_simple": 0, "look_at_obj_in_light": 1, "pick_clean_then_place_in_recep": 2,
              "pick_heat_then_place_in_recep": 2, "pick_cool_then_place_in_recep": 2, "pick_two_obj_and_place": 3}


class ALFWorldTaskSpace(TaskSpace):
    """ALFWorld games generated from alfworld's 120 floor plans, all six task types. params:
    task_type (pick_and_place_simple, pick_two_obj_and_place, look_at_obj_in_light,
    pick_clean_then_place_in_recep, pick_heat_then_place_in_recep, pick_cool_then_place_in_recep),
    floorplan (1-30 kitchens, 201-230 living rooms, 301-330 bedrooms, 401-430 bathrooms), object
    (e.g. "Apple"), target (a receptacle type such as "CounterTop", or "DeskLamp" / "FloorLamp"
    for look_at_obj_in_light). Instructions read like "heat some apple and put it in countertop."."""

    env_id = ENV_ID
    split_dir = SPLIT_DIR

    def check_params(self, params: dict) -> dict:
        p = check_schema(params, {"task_type": str, "floorplan": int, "object": str, "target": str},
                         what="ALFWorld")
        if p["task_type"] not in scenes.TASK_TYPES:
            raise ValueError(f"task_type must be one of {', '.join(scenes.TASK_TYPES)}, got {p['task_type']!r}")
        scenes.room_type(p["floorplan"])
        fp = scenes.floorplan(p["floorplan"])
        objs = games.goal_objects(p["task_type"], fp)
        if p["object"] not in objs:
            raise ValueError(f"FloorPlan{fp.number} ({fp.room}) has no {p['task_type']} goal on {p['object']!r}; "
                             f"objects: {', '.join(objs) or 'none'}")
        targets = games.goal_targets(p["task_type"], fp, p["object"])
        if p["target"] not in targets:
            raise ValueError(f"{p['target']!r} is not a target for {p['object']} in FloorPlan{fp.number}; "
                             f"targets: {', '.join(targets)}")
        return p

    def reserved(self, spec: TaskSpec) -> bool:
        """Games on ALFRED's test floor plans belong to heldout_unseen, whatever their id."""
        return spec.params.get("floorplan") in set(_unseen())

    # --- sampling ---------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, task_type: str | None = None, unseen: bool = False,
               **fixed: Any) -> TaskSpec:
        """A random game: keywords fix task_type / floorplan / object / target; `unseen=True`
        draws from the test floor plans (what heldout_unseen is made of), False (the default,
        what training uses) from the others."""
        r = random.Random(int(rng.integers(2**63)))
        return self._sample(r, task_type=task_type, unseen=unseen, **fixed)

    def _sample(self, r: random.Random, task_type: str | None = None, unseen: bool = False,
                **fixed: Any) -> TaskSpec:
        task_type = task_type or r.choice(scenes.TASK_TYPES)
        if task_type not in scenes.TASK_TYPES:
            raise ValueError(f"task_type must be one of {', '.join(scenes.TASK_TYPES)}, got {task_type!r}")
        unknown = set(fixed) - {"floorplan", "object", "target", "seed"}
        if unknown:
            raise ValueError(f"unknown ALFWorld task params {sorted(unknown)}")
        plans = _unseen() if unseen else _seen()
        combos = [c for c in _combos(task_type, plans)
                  if all(fixed.get(k, v) == v for k, v in zip(("floorplan", "object", "target"), c))]
        if not combos:
            raise ValueError(f"no {task_type} goal matches {fixed} (unseen={unseen})")
        n, obj, target = r.choice(combos)
        seed = fixed.get("seed")
        return TaskSpec(self.env_id, {"task_type": task_type, "floorplan": n, "object": obj, "target": target},
                        seed=r.randrange(2**31) if seed is None else int(seed))

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """Another placement of the same goal, the same goal in another floor plan of the same
        side of the seen / unseen split, another object or target in the same room, or another
        task type in the same room."""
        r = random.Random(int(rng.integers(2**63)))
        p = dict(spec.params)
        unseen = self.reserved(spec)
        kind = r.choice(("seed", "floorplan", "object", "target", "task_type"))
        if kind == "seed":
            return TaskSpec(self.env_id, p, seed=r.randrange(2**31))
        if kind == "task_type":  # same room, another type (objects and targets follow the new type's rules)
            other = r.choice([t for t in scenes.TASK_TYPES if t != p["task_type"]])
            try:
                return self._sample(r, task_type=other, unseen=unseen, floorplan=p["floorplan"])
            except ValueError:  # the room allows no goal of that type
                return TaskSpec(self.env_id, p, seed=r.randrange(2**31))
        keep = {k: p[k] for k in ("floorplan", "object", "target") if k != kind}
        if kind == "floorplan":
            keep.pop("target")  # the same object in another room; targets differ between rooms
        try:
            return self._sample(r, task_type=p["task_type"], unseen=unseen, **keep)
        except ValueError:
            return TaskSpec(self.env_id, p, seed=r.randrange(2**31))

    # --- oracle, categories -----------------------------------------------------------------
    def game_dir(self, spec: TaskSpec) -> Path:
        return games.game_dir(dict(spec.params), spec.seed)

    def traj_data(self, spec: TaskSpec) -> dict:
        return games.load_traj(self.game_dir(spec) / games.TRAJ_FILE)

    def solve(self, spec: TaskSpec) -> list[str]:
        """The planner's plan, kept in the game as its walkthrough."""
        return list(games.load_game(self.game_dir(spec) / games.GAME_FILE)["walkthrough"])

    def solve_searching(self, spec: TaskSpec, rng: np.random.Generator | None = None,
                        dawdle_prob: float = 0.0, max_steps: int = 50) -> list[str]:
        """The commands of a demonstrator that knows only what it has seen (searching.py): it
        searches receptacles in the admissible list's order, opening closed ones, and remembers
        where it saw the task's things, as the chat layer's marks and `memory_seen` let a policy.
        Its order is fixed (`rng` is not used: a learnable order, not a random one); a plan that
        does not win within `max_steps` is returned as far as it got."""
        if dawdle_prob:
            raise ValueError("ALFWorld's searching demonstrator does not dawdle: set sft.dawdle_prob=0")
        traj = self.traj_data(spec)
        engine = Engine.acquire()
        try:
            engine.load(games.load_game(self.game_dir(spec) / games.GAME_FILE))
            return searching.play(engine, traj.get("task_type", ""), traj.get("pddl_params", {}), max_steps)
        finally:
            engine.release()

    def teacher(self, spec: TaskSpec) -> searching.SearchingTeacher:
        """The searching demonstrator, fed an episode step by step (DAgger, sft.dagger)."""
        traj = self.traj_data(spec)
        return searching.SearchingTeacher(traj.get("task_type", ""), traj.get("pddl_params", {}))

    def validate(self, spec: TaskSpec) -> bool:
        """The game builds: the planner solves it and its plan, replayed, wins (games.py)."""
        try:
            self.game_dir(canonical(self, spec))
            return True
        except (ValueError, TypeError, KeyError, ConfigError):
            return False

    def category(self, spec: TaskSpec) -> str:
        return f"{spec.params['task_type']}/{scenes.room_type(spec.params['floorplan'])}"

    def difficulty(self, spec: TaskSpec) -> float:
        """Higher is harder, for the task generator's easier / harder variants: the receptacles
        to search (6-54 in ALFWorld's rooms) and the steps the task type adds after finding the
        object (TYPE_STEPS)."""
        p = spec.params
        return len(scenes.floorplan(int(p["floorplan"])).receptacles) / 10 + TYPE_STEPS[p["task_type"]]

    # --- splits -----------------------------------------------------------------------------
    def build_splits(self, per_type: dict[str, int] | None = None, log=None) -> dict[str, list[TaskSpec]]:
        """Checked games, `per_type[split]` of each task type per split. Every game is built and
        checked (about a second each; built games come from the cache). Held-out splits first,
        then train; within a split the task types take turns, each from its own seeded stream,
        so the first N games of a type are the same whatever the counts asked for: a build cut
        short and rerun with a smaller count finishes from the cache."""
        per_type = per_type or {"heldout_unseen": 20, "heldout": 20, "train": 100}
        seeds = {"train": 11, "heldout": 22, "heldout_unseen": 33}
        taken: set[str] = set()
        out = {}
        for name in ("heldout_unseen", "heldout", "train"):
            count = per_type.get(name, 0)
            streams = {t: random.Random(seeds[name] * 100 + k) for k, t in enumerate(scenes.TASK_TYPES)}
            chosen: dict[str, list[TaskSpec]] = {t: [] for t in scenes.TASK_TYPES}
            for i in range(count):
                for task_type, r in streams.items():
                    for _ in range(50):
                        spec = self._sample(r, task_type=task_type, unseen=(name == "heldout_unseen"))
                        if spec.task_id not in taken and self.validate(spec):
                            taken.add(spec.task_id)
                            chosen[task_type].append(spec)
                            break
                if log and ((i + 1) % 10 == 0 or i + 1 == count):
                    log(f"{name}: {i + 1} of {count} per type")
            out[name] = [spec for i in range(count) for t in scenes.TASK_TYPES if i < len(chosen[t])
                         for spec in (chosen[t][i],)]
        return out


def _unseen() -> tuple[int, ...]:
    return scenes.unseen_floorplans()


def _seen() -> tuple[int, ...]:
    unseen = set(_unseen())
    return tuple(n for n in scenes.all_floorplans() if n not in unseen)


_COMBOS: dict = {}


def _combos(task_type: str, plans: tuple[int, ...]) -> list[tuple[int, str, str]]:
    key = (task_type, plans)
    if key not in _COMBOS:
        _COMBOS[key] = games.goal_combos(task_type, plans)
    return _COMBOS[key]


_SOLVABLE = re.compile(r'"solvable":\s*(true|false|null)')


def _marked_solvable(path: Path) -> bool:
    """Whether a game file says `"solvable": false` or null (alfworld's loader skips those, and
    so do we, so split sizes match the literature's). alfworld writes the key after the PDDL, so
    the file's tail is read first. A file we cannot read stays in: its reset names the problem."""
    from agentgym.safe_files import open_regular

    try:
        with open_regular(path, "ALFWorld game") as f:  # a FIFO or device: kept, and refused at reset
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - 16384))
            match = _SOLVABLE.search(f.read(16384).decode("utf-8", "replace"))
            if match is None and size <= games.MAX_GAME_BYTES:
                f.seek(0)
                match = _SOLVABLE.search(f.read(games.MAX_GAME_BYTES).decode("utf-8", "replace"))
    except OSError:
        return True
    return match is None or match.group(1) == "true"


class OfficialTaskSpace(TaskSpace):
    """ALFWorld's official games under `data_path` (what `alfworld-download` fetches, e.g.
    $ALFWORLD_DATA/json_2.1.1): train, valid_seen and valid_unseen play as our train, heldout
    and heldout_unseen. params: {"game": path of the game's folder relative to data_path}."""

    env_id = ENV_ID

    def __init__(self, data_path: str | os.PathLike):
        self.data_path = Path(data_path).expanduser()
        if not self.data_path.is_dir():
            raise ConfigError(f"ALFWorld data_path {self.data_path} is not a folder: pass the folder holding "
                              "train/, valid_seen/ and valid_unseen/ (e.g. $ALFWORLD_DATA/json_2.1.1)")

    @cached_property
    def _games(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {name: [] for name in OFFICIAL_SPLITS.values()}
        for root, dirs, files in os.walk(self.data_path):
            dirs.sort()
            if games.GAME_FILE not in files:
                continue
            rel = Path(root).relative_to(self.data_path)
            if "movable" in str(rel) or "Sliced" in str(rel):
                continue
            split = OFFICIAL_SPLITS.get(rel.parts[0]) if rel.parts else None
            if split is not None and _marked_solvable(Path(root) / games.GAME_FILE):
                found[split].append(rel.as_posix())
        if not any(found.values()):
            raise ConfigError(f"no ALFWorld games under {self.data_path}: expected train/, valid_seen/ or "
                              f"valid_unseen/ folders holding */{games.GAME_FILE} (run alfworld-download)")
        return found

    def read_split(self, name: str) -> tuple[TaskSpec, ...]:
        if name not in self.split_names:
            return super().read_split(name)  # the usual one-line error
        return tuple(TaskSpec(self.env_id, {"game": g}, seed=0) for g in self._games[name])

    def check_params(self, params: dict) -> dict:
        p = check_schema(params, {"game": str}, what="official ALFWorld")
        if p["game"] not in self._known:
            raise ValueError(f"{p['game']!r} is not a game under {self.data_path}")
        return p

    @cached_property
    def _known(self) -> set[str]:
        return {g for names in self._games.values() for g in names}

    def reserved(self, spec: TaskSpec) -> bool:
        """Games of valid_seen / valid_unseen, and any game under train/ that plays what one of
        them plays (a link to it or a copy: the same PDDL problem), are held out."""
        game = spec.params.get("game")
        if not isinstance(game, str):
            return False
        if not game.startswith("train/") or ".." in Path(game).parts:
            return True
        key = self._content(game)
        return key is not None and key in self._heldout_content

    def _content(self, game: str) -> str | None:
        """What a game plays: its PDDL problem with whitespace collapsed (None when unreadable;
        such a game fails at reset)."""
        if game not in self._content_keys:
            try:
                problem = games.load_game(self.data_path / game / games.GAME_FILE)["pddl_problem"]
                self._content_keys[game] = hashlib.sha256(" ".join(problem.split()).encode()).hexdigest()
            except games.GameError:
                self._content_keys[game] = None
        return self._content_keys[game]

    @cached_property
    def _content_keys(self) -> dict[str, str | None]:
        return {}

    @cached_property
    def _heldout_content(self) -> set[str]:
        held = [g for name in OFFICIAL_SPLITS.values() if name != "train" for g in self._games[name]]
        return {key for g in held if (key := self._content(g)) is not None}

    def game_dir(self, spec: TaskSpec) -> Path:
        return self.data_path / spec.params["game"]

    def traj_data(self, spec: TaskSpec) -> dict:
        return games.load_traj(self.game_dir(spec) / games.TRAJ_FILE)

    def solve(self, spec: TaskSpec) -> list[str] | None:
        """The game's walkthrough, or the planner's plan when the file has none."""
        path = self.game_dir(spec) / games.GAME_FILE
        data = games.load_game(path)
        if data.get("walkthrough"):
            return list(data["walkthrough"])

        try:
            engine = Engine(data)
            engine.reset()
            plan = engine.plan()
        except Exception as exc:  # noqa: BLE001 - any failure of the engine on this file
            raise games.GameError(f"ALFWorld game {path} does not load or plan ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''}): remove it from the data") from None
        if not plan:
            raise games.GameError(f"the planner finds no plan for ALFWorld game {path}: remove it from the data")
        return plan

    # the same demonstrator: it reads the game and its traj_data.json as for generated games
    solve_searching = ALFWorldTaskSpace.solve_searching

    def sample(self, rng: np.random.Generator, **_: Any) -> TaskSpec:
        train = self.read_split("train")
        if not train:
            raise ConfigError(f"no train games under {self.data_path}/train")
        return train[int(rng.integers(len(train)))]

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        return self.sample(rng)

    def category(self, spec: TaskSpec) -> str:
        game = spec.params["game"]
        parts = game.split("/")
        return parts[1].split("-")[0] if len(parts) > 1 else "game"
