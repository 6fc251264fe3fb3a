"""ALFWorldEnv (agentgym/ALFWorld-v0): ALFWorld's own text engine behind our TextEnv contract.

The game runs in TextWorld's PDDL backend with alfworld's wrappers (engine.py); texts are the
engine's, except that the "-= Welcome to TextWorld, ALFRED! =-" banner is dropped from the
first observation, as ReAct and most ALFWorld agents do. Without `data_path` the env plays
our generated games (games.py, shipped splits); with it, the official games under that folder.

Actions are matched to the admissible commands after lower-casing and collapsing spaces. Any
other string is answered "Nothing happens." (ALFWorld's reply) with `action_valid` False and
never reaches the engine. Reward is sparse, 1.0 on the step that wins (which terminates);
`info["score"]` is 1.0 on success and the goal's progress otherwise (progress.py), and with
`shaped_rewards=True` each step pays its progress delta. `info["anchor"]` hashes the PDDL
facts (without the look / examine bookkeeping), so GiGPO groups true states, not texts.

`fast=False` runs the stock engine (for comparisons); the texts are the same.
`list_help=False` leaves ALFWorld's always-admissible "help" out of `admissible_actions`
(household never lists it; a household-trained policy lost 0.05 of success to that one entry in
its prompt, docs/alfworld.md); "help" still works as a command.
"""

from __future__ import annotations

import weakref

from agentgym.core import TextEnv
from agentgym.envs.alfworld import games
from agentgym.envs.alfworld.progress import goal_progress
from agentgym.envs.alfworld.searching import first_observation
from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace, OfficialTaskSpace
from agentgym.errors import require
from agentgym.snapshot import SnapshotError, need_bool, need_keys, need_str, need_str_list
from agentgym.tasks.spec import TaskSpec
from agentgym.envs.alfworld.engine import Engine

_GENERATED = ALFWorldTaskSpace()


def _normalize(action: str) -> str:
    return " ".join(action.lower().split())


class ALFWorldEnv(TextEnv):
    rules = (
        "You are in a room of a house (ALFWorld) and must complete a household task. Commands: look, inventory, "
        "go to X, open X, close X, take X from Y, move X to Y, examine X, use X, heat X with Y, clean X with Y, "
        "cool X with Y. X and Y are names as you see them, e.g. \"take apple 1 from countertop 1\". Containers "
        "(cabinet, drawer, fridge, microwave, safe) must be opened to see or take what is inside. You carry one "
        "object at a time. Heat with a microwave, cool with a fridge, clean with a sinkbasin; use a desklamp or "
        "floorlamp to turn it on. A command that cannot be done gives \"Nothing happens.\""
    )

    task_space = _GENERATED  # an env made with data_path plays the official games' space instead
    snapshot_version = 1

    def __init__(self, data_path: str | None = None, fast: bool = True, shaped_rewards: bool = False,
                 list_help: bool = True, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        require("alfworld", "alfworld")
        require("fast_downward", "alfworld")
        self.task_space = OfficialTaskSpace(data_path) if data_path is not None else _GENERATED
        if data_path is not None:
            self.task_space._games  # index the folder now: a data_path without games fails at make
        self.data_path = data_path
        self.fast = bool(fast)
        self.shaped_rewards = bool(shaped_rewards)
        self.list_help = bool(list_help)
        self._engine = None
        self._engine_game = None
        self._history: list[str] = []

    # --- episode ----------------------------------------------------------------------------
    def _load(self, task: TaskSpec):

        folder = self.task_space.game_dir(task)
        path = folder / games.GAME_FILE
        if self._engine is None or self._engine_game != path:
            data = games.load_game(path)
            traj = self.task_space.traj_data(task)  # read first: a bad one leaves no half-loaded game
            self._engine_game = None
            if self._engine is None:
                self._engine = Engine.acquire(fast=self.fast)
                # An env that is garbage-collected without close() gives its engine back too:
                # unclosed envs each kept a 34 MB library copy and its /tmp space (engine.py).
                self._give_back = weakref.finalize(self, self._engine.release)
            try:
                self._engine.load(data)
            except Exception as exc:  # the PDDL or grammar inside a readable JSON is broken
                raise games.GameError(f"ALFWorld game {path} does not load ({type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0] if str(exc) else ''}): re-download or regenerate it"
                                      ) from None
            self._engine_game = path
            self._params, self._task_type = traj.get("pddl_params", {}), traj.get("task_type", "")
        return self._engine

    def _reset(self, task: TaskSpec):
        engine = self._load(task)
        state = engine.reset()
        self._history = []
        self._done = False
        obs, self._instruction = first_observation(state.feedback)
        self._progress = self._measure()
        return obs, self._info(True)

    def _step(self, action: str):
        command = _normalize(action)
        admissible = self._engine.state["admissible_commands"]
        if self._done or command not in admissible:
            return "Nothing happens.", 0.0, self._done, False, self._info(False)
        before = self._progress
        state = self._engine.step(command)
        self._history.append(command)
        self._done = bool(state["won"])
        self._progress = self._measure()
        if self.shaped_rewards:
            reward = self._progress - before
        else:
            reward = 1.0 if self._done else 0.0
        return state.feedback.strip(), reward, self._done, False, self._info(True)

    def _measure(self) -> float:
        if self._engine.state["won"]:
            return 1.0
        return goal_progress(self._engine, self._task_type, self._params)

    def _info(self, valid: bool) -> dict:
        won = bool(self._engine.state["won"])
        return {
            "task_id": self.task.task_id,
            "instruction": self._instruction,
            "anchor": self._engine.anchor(),
            "admissible_actions": [c for c in self._engine.state["admissible_commands"]
                                   if self.list_help or c != "help"],
            "action_valid": valid,
            "success": won,
            "score": 1.0 if won else self._progress,
            "progress": self._progress,
        }

    # --- snapshots: the commands played, replayed on the engine ------------------------------
    # The PDDL state lives in fast-downward's C structures, which have no data form; the engine is
    # deterministic, so the commands since reset rebuild it exactly. The snapshot also carries the
    # anchor (a hash of the PDDL facts) and the restore checks it: an edited command list that
    # reaches another state, or plays a command that is not admissible, is refused.
    def _get_state(self) -> dict:
        return {"commands": list(self._history), "done": self._done, "anchor": self._engine.anchor()}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("commands", "done", "anchor"))
        commands = need_str_list(state["commands"], "commands")
        done, anchor = need_bool(state["done"], "done"), need_str(state["anchor"], "anchor")
        before = list(self._history)
        problem = self._replay(commands)
        if problem is None and self._engine.anchor() != anchor:
            problem = "its commands reach another state than its anchor says"
        if problem is None and done != bool(self._engine.state["won"]):
            problem = "done does not match the game"
        if problem is not None:
            self._replay(before)  # back to where the env was
            raise SnapshotError(f"the snapshot's state is impossible for this env: {problem}")

    def _replay(self, commands: list[str]) -> str | None:
        """Reset the engine and play `commands`; the first problem, or None."""
        self._engine.reset()
        self._history, self._done = [], False
        for command in commands:
            if self._done or command not in self._engine.state["admissible_commands"]:
                self._progress = self._measure()
                return f"command {command[:60]!r} is not admissible where it is played"
            self._done = bool(self._engine.step(command)["won"])
            self._history.append(command)
        self._progress = self._measure()
        return None

    # --- pickling: the engine holds ctypes handles; drop it and replay the episode ----------
    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_engine", "_engine_game", "_give_back"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._engine = None
        self._engine_game = None
        if self.task is not None:
            history = list(state.get("_history", []))
            done = state.get("_done", False)
            self._reset(self.task)
            for command in history:
                self._engine.step(command)
            self._history = history
            self._done = done
            self._progress = self._measure()

    def close(self):
        give_back = self.__dict__.pop("_give_back", None)
        if give_back is not None:
            give_back.detach()  # the engine may serve another env after this: never released twice
        if self._engine is not None:
            self._engine.release()  # the next env of this process reuses it (engine.py: why)
        self._engine = None
        self._engine_game = None
