"""Any TextWorld game as an agentgym TextEnv.

State, admissible commands, score and the win flag come from TextWorld itself; the anchor is
a hash of the game's true state (its logical facts), so GiGPO groups states, not texts.
Only admissible commands reach the game: anything else is an invalid action answered with
"Nothing happens.", as in ALFWorld (which is built on TextWorld), and never an exception.
"""

from __future__ import annotations

import hashlib
import re

from agentgym.core import TextEnv
from agentgym.envs.textworld.games import game_file, textworld_noise_off
from agentgym.envs.textworld.tasks import TextWorldTaskSpace
from agentgym.errors import require
from agentgym.snapshot import SnapshotError, need_bool, need_keys, need_str, need_str_list
from agentgym.tasks.spec import TaskSpec

_BANNER_LINE = re.compile(r"\${2,}")


def strip_banner(text: str) -> str:
    """Drop TextWorld's ASCII-art logo from the opening text (noise for a language model)."""
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if _BANNER_LINE.search(line)), default=-1)
    return "\n".join(lines[last + 1:]).strip()


def _normalize(action: str) -> str:
    return " ".join(action.lower().split())


class TextWorldEnv(TextEnv):
    rules = (
        "You play a text adventure. Commands look like: go north, take X, take X from Y, put X on Y, "
        "insert X into Y, open X, close X, unlock X with Y, examine X, eat X, look, inventory. "
        "Only the admissible commands listed each turn have an effect."
    )

    snapshot_version = 1

    def __init__(self, challenge: str = "tw-simple", game_file: str | None = None, shaped_rewards: bool = False,
                 render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.task_space = TextWorldTaskSpace.for_challenge(challenge, game_file)
        self.shaped_rewards = shaped_rewards
        self._env = None
        self._game_path = None

    def _start(self, spec: TaskSpec):
        textworld = require("textworld", "textworld")
        path = game_file(spec)
        if self._env is None or path != self._game_path:
            self.close()
            infos = textworld.EnvInfos(admissible_commands=True, facts=True, objective=True, won=True, lost=True,
                                       score=True, max_score=True, extras=["walkthrough"])
            with textworld_noise_off():
                self._env = textworld.start(str(path), request_infos=infos)
            self._game_path = path
        return self._env

    def _info(self, valid: bool) -> dict:
        gs = self._state
        max_score = gs.max_score or 1
        facts = sorted(map(str, gs.facts or ()))
        return {
            "task_id": self.task.task_id,
            "instruction": self._instruction,
            "anchor": hashlib.sha1("\n".join(facts).encode()).hexdigest()[:16],
            "admissible_actions": sorted(gs.admissible_commands or ()),
            "action_valid": valid,
            "success": bool(gs.won),
            "score": 1.0 if gs.won else max(0.0, min(1.0, gs.score / max_score)),
            "progress": max(0.0, min(1.0, gs.score / max_score)),
        }

    # --- snapshots: the commands played, replayed on the game ---------------------------------
    # TextWorld's state lives in its engine (a compiled game); it is deterministic, so the
    # commands since reset rebuild it. The anchor (a hash of the game's facts) is checked after.
    def _get_state(self) -> dict:
        return {"commands": list(self._history), "done": self._done, "anchor": self._info(True)["anchor"]}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("commands", "done", "anchor"))
        commands = need_str_list(state["commands"], "commands")
        done, anchor = need_bool(state["done"], "done"), need_str(state["anchor"], "anchor")
        before, done_before = list(self._history), self._done
        problem = self._replay(commands)
        if problem is None and self._info(True)["anchor"] != anchor:
            problem = "its commands reach another state than its anchor says"
        if problem is None and done != self._done:
            problem = "done does not match the game"
        if problem is not None:
            self._replay(before)  # back to where the env was
            self._done = done_before
            raise SnapshotError(f"the snapshot's state is impossible for this env: {problem}")

    def _replay(self, commands: list[str]) -> str | None:
        """Reset the game and play `commands`; the first problem, or None."""
        self._state = self._env.reset()
        self._admissible = {_normalize(a): a for a in self._state.admissible_commands or ()}
        self._history, self._done = [], False
        for command in commands:
            if self._done or command not in (self._state.admissible_commands or ()):
                return f"command {command[:60]!r} is not admissible where it is played"
            self._state, _, done = self._env.step(command)
            self._history.append(command)
            self._admissible = {_normalize(a): a for a in self._state.admissible_commands or ()}
            self._done = bool(done or self._state.won or self._state.lost)
        return None

    # --- pickling: the game's ctypes handles cannot be pickled; drop them and rebuild ---------
    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_env", "_game_path", "_state", "_admissible"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._env = None
        self._game_path = None
        if self.task is not None:  # replay the episode so far on a fresh game
            history = list(self.__dict__.get("_history", []))
            self._reset(self.task)
            for command in history:
                self._state, _, _ = self._env.step(command)
                self._admissible = {_normalize(a): a for a in self._state.admissible_commands or ()}
            self._history = history
            self._done = bool(self._state.won or self._state.lost) or state.get("_done", False)

    def _reset(self, task: TaskSpec):
        self._history = []
        env = self._start(task)
        self._state = env.reset()
        self._instruction = (self._state.objective or "").strip()
        self._admissible = {_normalize(a): a for a in self._state.admissible_commands or ()}
        self._done = False
        return strip_banner(self._state.feedback), self._info(True)

    def _step(self, action: str):
        command = self._admissible.get(_normalize(action)) if not self._done else None
        if command is None:
            return "Nothing happens.", 0.0, self._done, False, self._info(False)
        before = self._state.score
        self._state, _, done = self._env.step(command)
        self._history.append(command)
        self._admissible = {_normalize(a): a for a in self._state.admissible_commands or ()}
        self._done = bool(done or self._state.won or self._state.lost)
        info = self._info(True)
        if self.shaped_rewards:
            reward = (self._state.score - before) / (self._state.max_score or 1)
        else:
            reward = info["score"] if self._done else 0.0
        return self._state.feedback.strip(), reward, self._done, False, info

    def close(self):
        if self._env is not None:
            self._env.close()
            self._env = None
