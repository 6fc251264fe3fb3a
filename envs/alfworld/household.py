"""Household -> ALFWorld: the same task playable in both engines.

`household_game(spec)` turns an agentgym/Household-v0 task into an ALFWorld game (game.tw-pddl
data and traj_data) with the same receptacles, objects, names ("cabinet 2", "apple 1"), open
containers, object properties and goal, so a household command sequence can be replayed in
ALFWorld's engine. Names match because ALFWorld's demangler numbers the instances of a type in
reverse order of their ids: the ids are written so that household's "cabinet 1" gets number 1.
Each receptacle has its own location (household has no shared spots). The task sentence is
household's. benchmarks/envs/alfworld_parity.py replays the household oracle in both engines.
"""

from __future__ import annotations

from agentgym.envs.alfworld import games, scenes
from agentgym.envs.household.world import CLEAN, COOL, HOT, get_layout
from agentgym.registration import get_task_space

TASK_TYPE = {
    "pick_and_place": "pick_and_place_simple",
    "look_at_obj_in_light": "look_at_obj_in_light",
    "pick_clean_then_place": "pick_clean_then_place_in_recep",
    "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place": "pick_two_obj_and_place",
}


def alfred_type(name: str) -> str:
    """household's one-word type ("sinkbasin") -> ALFRED's class ("SinkBasin")."""
    c = scenes.constants()
    table = {t.lower(): t for t in set(c.OBJECTS) | c.RECEPTACLES}
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"household type {name!r} has no ALFRED class") from None


def _ids(names: list[str], types: list[str], receptacle: bool) -> list[str]:
    """ALFRED ids whose demangled names are household's `names` ("cabinet 2")."""
    count: dict[str, int] = {}
    for t in types:
        count[t] = count.get(t, 0) + 1
    out = []
    for name, t in zip(names, types):
        k = int(name.rsplit(" ", 1)[1])
        a = alfred_type(t)
        # The demangler gives number `count` to the smallest id and 1 to the largest.
        coord = f"+{count[t] - k:02d}.00|+00.00|+00.00"
        if a in ("SinkBasin", "BathtubBasin"):
            out.append(f"{a[:-5]}|{coord}|{a}")
        else:
            out.append(f"{a}|{coord}" if receptacle else f"{a}|{coord[:-1]}1")
    return out


def household_game(spec) -> tuple[dict, dict]:
    """(game.tw-pddl data, traj_data) of a household task."""

    c = scenes.constants()
    layout = get_layout(spec)
    m = games._mangle
    rids = _ids(layout.rec_names, layout.rec_types, True)
    oids = _ids(layout.obj_names, layout.obj_types, False)
    locs = [f"loc|{4 * i}|0|0|30" for i in range(len(rids))]
    otypes = sorted(c.OBJECTS_SET - (c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET))
    rtypes = sorted(c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET)
    objects = ["agent1 - agent"] + [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    objects += [f"{m(o)} - object" for o in oids] + [f"{m(r)} - receptacle" for r in rids]
    objects += [f"{m(loc)} - location" for loc in locs + [games.START_LOC]]
    init = [f"(atLocation agent1 {m(games.START_LOC)})"]
    for i, (rid, t) in enumerate(zip(rids, layout.rec_types)):
        init += [f"(receptacleType {m(rid)} {alfred_type(t)}Type)", f"(receptacleAtLocation {m(rid)} {m(locs[i])})"]
        if layout.rec_openable[i]:
            init.append(f"(openable {m(rid)})")
            if layout.init_open[i]:
                init.append(f"(opened {m(rid)})")
    for i, (oid, t) in enumerate(zip(oids, layout.obj_types)):
        o, r = m(oid), layout.init_loc[i]
        init += [f"(objectType {o} {alfred_type(t)}Type)", f"(inReceptacle {o} {m(rids[r])})",
                 f"(objectAtLocation {o} {m(locs[r])})"]
        if layout.obj_is_lamp[i]:
            init.append(f"(toggleable {o})")
            continue
        init.append(f"(pickupable {o})")
        e = layout.obj_effects[i]
        init += [f"({p} {o})" for bit, p in ((CLEAN, "cleanable"), (HOT, "heatable"), (COOL, "coolable")) if e & bit]
    # household lets any object go on any receptacle; so does this game (ALFRED's canContain
    # table would refuse e.g. a pan on a sofa, and the oracle's moves are household's).
    present_r = sorted({alfred_type(t) for t in layout.rec_types})
    present_o = sorted({alfred_type(t) for t in layout.obj_types})
    init += [f"(canContain {rt}Type {ot}Type)" for rt in present_r for ot in present_o]
    import alfworld.gen.goal_library as glib

    task_type = TASK_TYPE[layout.task_type]
    look = task_type == "look_at_obj_in_light"
    obj, target = alfred_type(layout.goal_type), alfred_type(layout.target)
    goal = glib.gdict[task_type]["pddl"].format(obj=obj, recep="" if look else target, toggle=target if look else "",
                                               mrecep="").replace("#", "-")
    problem = (f"(define (problem plan_household_{spec.task_id})\n(:domain alfred)\n(:objects\n  "
               + "\n  ".join(objects) + "\n)\n(:init\n  " + "\n  ".join(init) + "\n)\n" + goal.strip() + "\n")
    domain, grammar = games.logic_files()
    sentence = layout.instruction.rstrip(".")
    game = {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", sentence), "pddl_problem": problem}
    traj = {"task_type": task_type, "pddl_params": {"object_target": obj, "parent_target": "" if look else target,
                                                     "toggle_target": target if look else "", "mrecep_target": "",
                                                     "object_sliced": False},
            "task_id": f"household_{spec.task_id}"}
    return game, traj


def export_household(tasks, folder, split: str = "valid_seen") -> list[str]:
    """Write household tasks as ALFWorld games in the official layout, so that
    `gym.make("agentgym/ALFWorld-v0", data_path=folder)` plays them in ALFWorld's engine
    (valid_seen -> its heldout split, valid_unseen -> heldout_unseen, train -> train).

    Each game goes to `<folder>/<split>/<task type>-<household task id>/` with household's
    oracle plan as the walkthrough. Returns the games' paths relative to `folder` (the
    `game` parameter of their ALFWorld TaskSpecs), in the order of `tasks`."""
    import json
    from pathlib import Path

    if split not in ("train", "valid_seen", "valid_unseen"):
        raise ValueError(f"split must be train, valid_seen or valid_unseen, got {split!r}")
    space = get_task_space("agentgym/Household-v0")
    out = []
    for spec in tasks:
        game, traj = household_game(spec)
        plan = list(space.solve(spec))
        game.update(solvable=True, walkthrough=plan)
        traj["plan"] = {"high_pddl": [{"discrete_action": {"action": c}} for c in plan]}
        rel = f"{split}/{traj['task_type']}-{spec.task_id}"
        target = Path(folder) / rel
        target.mkdir(parents=True, exist_ok=True)
        (target / games.GAME_FILE).write_text(json.dumps(game))
        (target / games.TRAJ_FILE).write_text(json.dumps(traj, indent=1))
        out.append(rel)
    return out
