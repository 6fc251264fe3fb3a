"""HouseholdEnv: an ALFWorld-like household in pure Python.

The agent walks between numbered receptacles of one room, opens containers, carries one object
at a time, heats / cools / cleans it with the microwave / fridge / sinkbasin, turns lamps on,
and must reach one of six kinds of goals (see tasks.py). Text follows ALFWorld's style.

Reward: sparse by default, as in ALFWorld: 1.0 on the step that completes the task (which
terminates the episode), 0 otherwise. `info["score"]` is the partial credit of the current
state (sub-goal progress, 1.0 on success), so an episode cut by the time limit still reports
how far it got. With `shaped_rewards=True` every step pays its progress delta instead, and the
rewards of an episode add up to its final score.
"""

from __future__ import annotations

from agentgym.core import TextEnv
from agentgym.envs.household.commands import CHANGES_STATE, GRAMMAR, entry_for, execute, invalid_message, lookup
from agentgym.envs.household.tasks import HouseholdTaskSpace
from agentgym.envs.household.world import HELD, MIDDLE, NOTHING, ON, World, get_layout
from agentgym.snapshot import need, need_bool, need_int, need_keys
from agentgym.tasks.spec import TaskSpec


class HouseholdEnv(TextEnv):
    task_space = HouseholdTaskSpace()
    rules = (
        "You are in a room of a house and must complete a household task. "
        f"Commands: {GRAMMAR}. X and Y are names as you see them, e.g. \"take apple 1 from countertop 1\". "
        "Closed containers (cabinet, drawer, fridge, microwave, safe) must be opened before you can see, take or "
        "put anything inside. You carry one object at a time. Heat with a microwave, cool with a fridge, clean "
        "with a sinkbasin; use a desklamp or floorlamp to turn it on. A command that cannot be done gives "
        "\"Nothing happens.\""
    )

    snapshot_version = 1

    def __init__(self, render_mode: str | None = None, shaped_rewards: bool = False):
        super().__init__(render_mode=render_mode)
        self.shaped_rewards = bool(shaped_rewards)
        self.world: World | None = None
        self._entry = None

    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        layout = get_layout(task)
        self.world = World(layout)
        self._entry = entry_for(self.world)
        return f"{layout.room_line}\n\nYour task is to: {layout.instruction}", self._info(True)

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        world, before = self.world, self._entry
        op, text = lookup(before, world, action)
        if op is None:
            obs, valid = invalid_message(text), False
        else:
            obs, valid = execute(world, op), True
            if op[0] in CHANGES_STATE:
                self._entry = entry_for(world)
        after = self._entry
        terminated = after.success
        if self.shaped_rewards:
            reward = after.progress - before.progress
        else:
            reward = 1.0 if terminated else 0.0
        return obs, reward, terminated, False, self._info(valid)

    # --- snapshots: the World's few lists ---------------------------------------------------
    def _get_state(self) -> dict:
        w = self.world
        return {"loc": w.loc, "held": w.held, "obj_loc": list(w.obj_loc), "rec_open": list(w.rec_open),
                "obj_flags": list(w.obj_flags), "shaped_rewards": self.shaped_rewards}

    def _set_state(self, state: dict) -> None:
        lay = self.world.layout
        need_keys(state, ("loc", "held", "obj_loc", "rec_open", "obj_flags", "shaped_rewards"))
        need(need_bool(state["shaped_rewards"], "shaped_rewards") == self.shaped_rewards,
             f"it was taken with shaped_rewards={state['shaped_rewards']}, this env has {self.shaped_rewards}")
        n_rec, n_obj = len(lay.rec_names), len(lay.obj_names)
        loc = state["loc"]
        if loc != MIDDLE:
            need_int(loc, 0, n_rec - 1, "loc (a receptacle index, or 255 for the middle of the room)")
        for name, n in (("obj_loc", n_obj), ("rec_open", n_rec), ("obj_flags", n_obj)):
            need(isinstance(state[name], list) and len(state[name]) == n, f"{name} must list {n} integers")
        obj_loc = [v if v == HELD else need_int(v, 0, n_rec - 1, "an object's location") for v in state["obj_loc"]]
        rec_open = [need_int(v, 0, 1, "an open flag") for v in state["rec_open"]]
        need(all(o or lay.rec_openable[r] for r, o in enumerate(rec_open)), "a receptacle that cannot open is closed")
        flags = [need_int(v, 0, 15, "an object's state bits") for v in state["obj_flags"]]
        for o, f in enumerate(flags):
            allowed = ON if lay.obj_is_lamp[o] else lay.obj_effects[o]
            need(f & ~allowed == 0, f"{lay.obj_names[o]} has state bits {f} it cannot take")
        held = state["held"]
        carried = [o for o, where in enumerate(obj_loc) if where == HELD]
        if held == NOTHING:
            need(not carried, "objects are carried while the hands are empty")
        else:
            need_int(held, 0, n_obj - 1, "held (an object index, or 255 for nothing)")
            need(carried == [held], f"the held object {held} is not the one carried ({carried})")
        w = self.world
        w.loc, w.held, w.obj_loc, w.rec_open, w.obj_flags = loc, held, obj_loc, rec_open, flags
        self._entry = entry_for(w)

    def _info(self, valid: bool) -> dict:
        entry, layout = self._entry, self.world.layout
        return {
            "task_id": layout.task_id,
            "instruction": layout.instruction,
            "anchor": entry.anchor,
            "admissible_actions": list(entry.actions),
            "action_valid": valid,
            "success": entry.success,
            "score": entry.progress,
            "progress": entry.progress,
        }
