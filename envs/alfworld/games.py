"""ALFWorld games generated from the shipped floor plans, in ALFWorld's own file format.

A task's params (task_type, floorplan, object, target) and seed determine one game: every
receptacle of the floor plan, every placeable object type of the room in one to three
instances (the goal object in one to four, two to four for pick_two) dropped into receptacles
that may hold them (alfworld's VAL_RECEPTACLE_OBJECTS), closed containers, the goal in PDDL
from alfworld's goal library and the task sentence from its templates. The result is a
`game.tw-pddl` (JSON: pddl_domain, grammar, pddl_problem, solvable, walkthrough) plus the
`traj_data.json` alfworld's loader and hand-coded expert read, exactly what the official
games look like, so alfworld's own tools play them too.

Games are built on first use into a cache (`$AGENTGYM_CACHE/alfworld/<key>/`, ~45 kB each)
and checked there: the planner must find a plan, and that plan, replayed in the engine, must
win. The plan is kept as the walkthrough (the oracle). A game whose goal holds at the start
is refused (every step would end the episode at once).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from agentgym.envs.alfworld import scenes
from agentgym.envs.alfworld.engine import cache_dir  # the engine keeps its translations there too
from agentgym.errors import ConfigError, require
from agentgym.tasks.spec import canonical_json
from agentgym.envs.alfworld.engine import UnreachableGoal
from agentgym.envs.alfworld.engine import Engine

MAX_INSTANCES = 3  # alfworld.gen.constants.MAX_NUM_OF_OBJ_INSTANCES
MAX_GOAL_INSTANCES = 4  # alfworld.gen.constants.PICKUP_REPEAT_MAX
START_LOC = "loc|-40|-40|0|30"  # the agent starts away from every receptacle, as in ALFWorld
# Part of every cache key: bump it when the generator changes what a (params, seed) builds.
GENERATOR_VERSION = 1
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
# ALFWorld's game files are ~110 kB and traj_data.json a few hundred kB; more is not a game.
MAX_GAME_BYTES = 16 << 20
MAX_TRAJ_BYTES = 16 << 20


class GameError(ConfigError):
    """A game file that cannot be played (corrupt, unsolvable, goal already true)."""


def game_key(params: dict, seed: int) -> str:
    body = {"params": params, "seed": seed, "generator": GENERATOR_VERSION}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()[:20]


def _mangle(name: str) -> str:
    """ALFRED ids as PDDL names (alfworld's PlannedGameState.fix_pddl_str_chars)."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(a, b)
    return name


# --- which goals a floor plan offers ----------------------------------------------------------
def goal_objects(task_type: str, fp: scenes.FloorPlan) -> list[str]:
    c = scenes.constants()
    if fp.room not in c.GOALS_VALID[task_type]:
        return []
    objs = [o for o in fp.object_types if o not in scenes.LAMPS]
    if task_type == "pick_clean_then_place_in_recep":
        objs = [o for o in objs if o in c.VAL_ACTION_OBJECTS["Cleanable"]]
    elif task_type == "pick_heat_then_place_in_recep":
        objs = [o for o in objs if o in c.VAL_ACTION_OBJECTS["Heatable"]]
    elif task_type == "pick_cool_then_place_in_recep":
        objs = [o for o in objs if o in c.VAL_ACTION_OBJECTS["Coolable"]]
    needs = {"pick_clean_then_place_in_recep": "SinkBasin", "pick_heat_then_place_in_recep": "Microwave",
             "pick_cool_then_place_in_recep": "Fridge"}.get(task_type)
    if needs and needs not in {r.rtype for r in fp.receptacles}:
        return []
    return objs


def goal_targets(task_type: str, fp: scenes.FloorPlan, obj: str) -> list[str]:
    """Receptacle types (or lamp types for look_at_obj_in_light) that complete a goal on `obj`."""
    c = scenes.constants()
    if task_type == "look_at_obj_in_light":
        return [lamp for lamp in scenes.LAMPS if lamp in fp.object_types]
    rtypes = sorted({r.rtype for r in fp.receptacles})
    # A receptacle that is also the appliance of the task would make it trivial or odd (heat in
    # the microwave, then put it in the microwave): ALFRED excludes those, so do we.
    skip = {"pick_clean_then_place_in_recep": {"SinkBasin"}, "pick_heat_then_place_in_recep": {"Microwave"},
            "pick_cool_then_place_in_recep": {"Fridge"}}.get(task_type, set())
    return [t for t in rtypes if obj in c.VAL_RECEPTACLE_OBJECTS.get(t, ()) and t not in skip]


def goal_combos(task_type: str, floorplans) -> list[tuple[int, str, str]]:
    out = []
    for n in floorplans:
        fp = scenes.floorplan(n)
        for obj in goal_objects(task_type, fp):
            for target in goal_targets(task_type, fp, obj):
                out.append((n, obj, target))
    return out


# --- one game -------------------------------------------------------------------------------
def _hosts(obj: str, fp: scenes.FloorPlan, c) -> list[scenes.Receptacle]:
    if obj in scenes.LAMPS:
        return [r for r in fp.receptacles if r.rtype in scenes.LAMP_HOSTS[obj]]
    return [r for r in fp.receptacles if obj in c.VAL_RECEPTACLE_OBJECTS.get(r.rtype, ())]


def build_problem(params: dict, seed: int, goal_only: bool = False) -> tuple[str, dict]:
    """The PDDL problem of a generated task, and its traj_data (task_type, pddl_params, scene).
    `goal_only` leaves out every object but the goal's (and the lamp): the planner's problem."""
    c = scenes.constants()
    task_type, n, obj, target = params["task_type"], params["floorplan"], params["object"], params["target"]
    fp = scenes.floorplan(n)
    r = random.Random(f"alfworld|{n}|{seed}")
    look = task_type == "look_at_obj_in_light"
    placements: list[tuple[str, str, scenes.Receptacle]] = []  # (object id, type, receptacle)
    used: set[str] = set()
    for otype in fp.object_types:
        hosts = _hosts(otype, fp, c)
        if not hosts:
            continue
        if otype == obj:
            count = r.randint(2 if task_type == "pick_two_obj_and_place" else 1, MAX_GOAL_INSTANCES)
        elif look and otype == target:
            count = 1
        elif otype in scenes.LAMPS:
            count = 1
        else:
            count = r.randint(1, MAX_INSTANCES)
        for _ in range(count):
            host = r.choice(hosts)
            # An id in ALFRED's form, unique in the room: type|x|y|z near its receptacle.
            while True:
                x, y, z = (r.randint(-300, 300) / 100 for _ in range(3))
                oid = f"{otype}|{x:+06.2f}|{abs(y):+06.2f}|{z:+06.2f}"
                if oid not in used:
                    used.add(oid)
                    break
            placements.append((oid, otype, host))
    # A goal already true at the start: move the goal objects out of target receptacles.
    if not look:
        others = [h for h in _hosts(obj, fp, c) if h.rtype != target]
        if not others:
            raise GameError(f"FloorPlan{n} has nowhere but {target} to put {obj}: no game")
        placements = [(oid, t, r.choice(others) if t == obj and h.rtype == target else h) for oid, t, h in placements]

    if goal_only:
        placements = [pl for pl in placements if pl[1] in (obj, target)]
    otypes = sorted(c.OBJECTS_SET - (c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET))
    rtypes = sorted(c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET)
    locs = sorted({h.loc for h in fp.receptacles} | {START_LOC})
    m = _mangle
    objects = ["agent1 - agent"]
    objects += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    objects += [f"{m(oid)} - object" for oid, _, _ in sorted(placements)]
    objects += [f"{m(h.rid)} - receptacle" for h in fp.receptacles]
    objects += [f"{m(loc)} - location" for loc in locs]
    init = [f"(atLocation agent1 {m(START_LOC)})"]
    for h in fp.receptacles:
        init.append(f"(receptacleType {m(h.rid)} {h.rtype}Type)")
        init.append(f"(receptacleAtLocation {m(h.rid)} {m(h.loc)})")
        if h.rtype in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {m(h.rid)})")
    for oid, otype, h in sorted(placements):
        o = m(oid)
        init += [f"(objectType {o} {otype}Type)", f"(inReceptacle {o} {m(h.rid)})", f"(objectAtLocation {o} {m(h.loc)})"]
        if otype in scenes.LAMPS:
            init.append(f"(toggleable {o})")
            continue
        init.append(f"(pickupable {o})")
        for prop, table in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable")):
            if otype in c.VAL_ACTION_OBJECTS[table]:
                init.append(f"({prop} {o})")
        if otype in c.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {o})")
    for rt in sorted(c.VAL_RECEPTACLE_OBJECTS):
        if rt in c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET:
            for ot in sorted(c.VAL_RECEPTACLE_OBJECTS[rt]):
                if ot in otypes:
                    init.append(f"(canContain {rt}Type {ot}Type)")
    import alfworld.gen.goal_library as glib

    goal = glib.gdict[task_type]["pddl"].format(obj=obj, recep="" if look else target, toggle=target if look else "",
                                               mrecep="").replace("#", "-")
    problem = (f"(define (problem plan_agentgym_{n}_{seed})\n(:domain alfred)\n(:objects\n  "
               + "\n  ".join(objects) + "\n)\n(:init\n  " + "\n  ".join(init) + "\n)\n" + goal.strip() + "\n")
    traj = {
        "task_type": task_type,
        "scene": {"floor_plan": f"FloorPlan{n}", "scene_num": n, "random_seed": seed},
        "pddl_params": {"object_target": obj, "parent_target": "" if look else target,
                        "toggle_target": target if look else "", "mrecep_target": "", "object_sliced": False},
        "task_id": f"agentgym_{game_key(params, seed)}",
    }
    return problem, traj


def task_sentence(traj: dict, seed: int) -> str:
    """One of alfworld's templates for the goal, picked by the seed (alfworld picks at random)."""
    import alfworld.gen.goal_library as glib

    p = traj["pddl_params"]
    templates = glib.gdict[traj["task_type"]]["templates"]
    return templates[seed % len(templates)].format(obj=p["object_target"].lower(), recep=p["parent_target"].lower(),
                                                   toggle=p["toggle_target"].lower(), mrecep=p["mrecep_target"].lower())


def logic_files() -> tuple[str, str]:
    require("alfworld", "alfworld")
    import alfworld

    data = Path(alfworld.__file__).parent / "data"
    return (data / "alfred.pddl").read_text(), (data / "alfred.twl2").read_text()


def make_game(params: dict, seed: int) -> tuple[dict, dict]:
    """(game.tw-pddl data, traj_data) of a generated task, not yet checked by the planner."""
    domain, grammar = logic_files()
    problem, traj = build_problem(params, seed)
    sentence = task_sentence(traj, seed)
    game = {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", sentence), "pddl_problem": problem}
    return game, traj


def check_game(game: dict, plan_problem: str | None = None) -> list[str]:
    """The planner's plan for `game`, verified by replaying it in the engine; GameError when the
    planner finds none, the replay does not win, or the goal holds at the start.

    `plan_problem` is what the planner searches (default: the game's own problem). The generator
    passes the problem without distractor objects: in ALFWorld's domain no precondition or goal
    reads an object of another type (receptacle capacity, `full`, is commented out), so the plan
    is the same, and the planner's search is 10-100x faster (6.6 s -> 0.06 s on a pick_two
    bedroom). The replay in the full game is what makes the walkthrough trustworthy either way."""

    engine, planner = _checkers()
    try:
        engine.load(game)
        state = engine.reset()
        if state["won"]:
            raise GameError("the goal already holds at the start")
        planner.load(game if plan_problem is None else dict(game, pddl_problem=plan_problem))
        planner.reset()
    except UnreachableGoal:
        raise GameError("the planner finds no plan (the goal is unreachable)") from None
    plan = planner.plan()
    if not plan:
        raise GameError("the planner finds no plan")
    for command in plan:
        if command not in state["admissible_commands"]:
            raise GameError(f"the plan's {command!r} is not admissible when replayed")
        state = engine.step(command)
    if not state["won"]:
        raise GameError("the plan, replayed, does not reach the goal")
    return plan


_CHECKERS: list = []


def _checkers():
    """Two engines per process (the game, the planner's problem), reused for every check."""
    if not _CHECKERS:
        _CHECKERS.extend((Engine(fast=True), Engine(fast=True)))
    return _CHECKERS


def game_dir(params: dict, seed: int) -> Path:
    """The checked game of a generated task, built into the cache on first use."""
    target = cache_dir() / game_key(params, seed)
    if (target / GAME_FILE).is_file():
        return target
    game, traj = make_game(params, seed)
    plan = check_game(game, build_problem(params, seed, goal_only=True)[0])
    game.update(solvable=True, walkthrough=plan)
    traj["plan"] = {"high_pddl": [{"discrete_action": {"action": c}} for c in plan]}
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written into a private folder and renamed into place: parallel workers asking for the same
    # game never see half a file.
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        (work / GAME_FILE).write_text(json.dumps(game))
        (work / TRAJ_FILE).write_text(json.dumps(traj, indent=1))
        try:
            os.rename(work, target)
        except OSError:
            if not (target / GAME_FILE).is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def load_game(path: Path) -> dict:
    """A game file's JSON, checked for the keys the engine needs; GameError naming the file."""
    from agentgym.safe_files import UnsafeFileError, read_json

    try:
        data = read_json(path, MAX_GAME_BYTES, "ALFWorld game")
    except UnsafeFileError as exc:
        raise GameError(f"{exc}: re-download or regenerate it") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GameError(f"cannot read ALFWorld game {path} ({type(exc).__name__}): "
                        "re-download or regenerate it") from None
    missing = [k for k in ("pddl_domain", "grammar", "pddl_problem") if not isinstance(data, dict) or k not in data]
    if missing:
        raise GameError(f"ALFWorld game {path} is corrupt (missing {', '.join(missing)}): re-download or regenerate it")
    bad = [k for k in ("pddl_domain", "grammar", "pddl_problem") if not isinstance(data[k], str)]
    if bad:
        raise GameError(f"ALFWorld game {path} is corrupt ({', '.join(bad)} not text): re-download or regenerate it")
    if data.get("solvable") is False:
        raise GameError(f"ALFWorld game {path} is marked unsolvable: remove it from {Path(path).parent.parent}")
    return data


def load_traj(path: Path) -> dict:
    """A game's traj_data.json, reduced to what progress reads: task_type (text) and pddl_params
    (text values); {} when the file is missing (progress then counts success only). GameError,
    one line naming the file, when it is there but not a regular file, too large, not JSON or not
    shaped like ALFWorld's."""
    from agentgym.safe_files import UnsafeFileError, read_json

    if not os.path.lexists(path):
        return {}
    try:
        data = read_json(path, MAX_TRAJ_BYTES, "ALFWorld traj_data")
    except (UnsafeFileError, OSError, UnicodeDecodeError, ValueError) as exc:
        raise GameError(f"{exc}: re-download or regenerate the game") from None
    params = data.get("pddl_params", {}) if isinstance(data, dict) else None
    if not isinstance(params, dict) or not isinstance(data.get("task_type", ""), str) \
            or not all(isinstance(v, str) if k.endswith("_target") else isinstance(v, (str, bool, int, float))
                       for k, v in params.items()):
        raise GameError(f"ALFWorld traj_data {path} is not shaped like ALFWorld's (task_type text, pddl_params "
                        "a mapping of text): re-download or regenerate the game")
    return {"task_type": data.get("task_type", ""), "pddl_params": params}
