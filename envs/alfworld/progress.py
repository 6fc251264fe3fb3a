"""How far an ALFWorld episode is towards its goal, read from the PDDL facts.

ALFWorld itself reports only won / not won. For partial credit (`info["score"]` of an episode
cut short, `shaped_rewards`) each task type's goal is split into the sub-goals an agent must
reach in order, and progress is the share reached (1.0 is the win, reported by the engine):

- pick_and_place_simple, look_at_obj_in_light: holding a goal object -> 0.5
- clean / heat / cool then place: holding a goal object -> 1/3, holding or having placed one
  that is clean / hot / cool -> 2/3
- pick_two_obj_and_place: holding one -> 0.2, one in a target receptacle -> 0.4, one placed and
  another held -> 0.6

`pddl_params` is traj_data.json's (object_target, parent_target, toggle_target); without them
(an official game missing its traj_data.json) progress is 0 until the win.
"""

from __future__ import annotations

from collections import defaultdict

_STATE = {"pick_clean_then_place_in_recep": "isclean", "pick_heat_then_place_in_recep": "ishot",
          "pick_cool_then_place_in_recep": "iscool"}
_READ = frozenset(("objecttype", "holds", "receptacletype", "inreceptacle", *_STATE.values()))


def facts_by_name(state, names: frozenset) -> dict[str, set[tuple[str, ...]]]:
    """Predicate name -> the argument tuples of its facts in `state`, for `names` only. Facts are
    stored by signature (name and argument types): reading only those signatures skips the ~2,000
    other facts of a room, at every step."""
    facts: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for signature, props in state._facts.items():
        if signature.name in names:
            for f in props:
                facts[f.name].add(tuple(a.name for a in f.arguments))
    return facts


def goal_progress(engine, task_type: str, pddl_params: dict) -> float:
    obj = (pddl_params or {}).get("object_target", "").lower()
    if not obj or not task_type:
        return 0.0
    facts = facts_by_name(engine._pddl._pddl_state, _READ)
    goal_objects = {o for o, t in facts["objecttype"] if t == obj + "type"}
    held = {o for _, o in facts["holds"]} & goal_objects
    if task_type in ("pick_and_place_simple", "look_at_obj_in_light"):
        return 0.5 if held else 0.0
    target = (pddl_params.get("parent_target") or "").lower() + "type"
    targets = {r for r, t in facts["receptacletype"] if t == target}
    placed = {o for o, r in facts["inreceptacle"] if r in targets} & goal_objects
    if task_type in _STATE:
        changed = {(o,) for o in goal_objects} & facts[_STATE[task_type]]
        changed = {o for (o,) in changed}
        if changed & (held | placed):
            return 2 / 3
        return 1 / 3 if held else 0.0
    if task_type == "pick_two_obj_and_place":
        if placed and held - placed:
            return 0.6
        return 0.4 if placed else 0.2 if held else 0.0
    return 0.0
