"""The verifier: success and sub-goal progress of a task, read off the true state.

Progress is a function of the state (not of the path), so shaped rewards (progress deltas)
telescope to the final progress and cannot be farmed by picking an object up and down.
Sub-goals per task type:

* pick_and_place: hold a goal object (1/2), have one in a destination (2/2)
* clean / heat / cool then place: hold one (1/3), have it treated (2/3), treated one placed (3/3)
* pick_two_obj_and_place: hold the first (1/4), place it (2/4), hold the second (3/4), place it
* look_at_obj_in_light: hold one (1/3), stand at the lamp with it (2/3), lamp on (3/3)
"""

from __future__ import annotations

from agentgym.envs.household.world import EFFECT_OF_TASK, HELD, ON, World


def evaluate(world: World) -> tuple[float, bool]:
    """(progress in [0, 1], success) of the world's current state."""
    lay = world.layout
    task_type = lay.task_type
    held_goal = world.held in lay.goal_objs
    dest = lay.dest_recs
    obj_loc = world.obj_loc
    if task_type == "pick_and_place":
        if any(obj_loc[o] in dest for o in lay.goal_objs):
            return 1.0, True
        return (0.5, False) if held_goal else (0.0, False)
    if task_type == "pick_two_obj_and_place":
        placed = min(2, sum(1 for o in lay.goal_objs if obj_loc[o] in dest))
        if placed == 2:
            return 1.0, True
        return (2 * placed + held_goal) / 4, False
    if task_type == "look_at_obj_in_light":
        if not held_goal:
            return 0.0, False
        if world.loc != obj_loc[lay.lamp]:
            return 1 / 3, False
        if world.obj_flags[lay.lamp] & ON:
            return 1.0, True
        return 2 / 3, False
    bit = EFFECT_OF_TASK[task_type]
    best = 0
    for o in lay.goal_objs:
        treated = world.obj_flags[o] & bit
        if treated and obj_loc[o] in dest:
            return 1.0, True
        stage = 2 if treated else (1 if obj_loc[o] == HELD else 0)
        best = max(best, stage)
    return best / 3, False
