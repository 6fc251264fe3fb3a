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
from agentgym.envs.household.world import World, get_layout
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
