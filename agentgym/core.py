"""TextEnv: the Gymnasium base class of every agentgym environment.

Observations and actions are strings. `reset` takes the task to play through
`options={"task": TaskSpec | task_id | None}`; `step` accepts any string and never raises on
bad input: an action the environment cannot parse or execute comes back as a helpful
observation with `info["action_valid"] = False`.

Subclasses implement `_reset(task)` and `_step(action)`; this class resolves tasks and checks
that every info dict carries the keys the trainers rely on (`StepInfo`, INFO_KEYS). The spec is
TextEnv's docstring.
Snapshots (`snapshot()` / `restore()`, the families' `_get_state` / `_set_state`) are specified
there too; agentgym.snapshot holds the Snapshot record, the wrapper-aware helpers and the checker.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypedDict

import gymnasium as gym

from agentgym.errors import TaskParamError
from agentgym.snapshot import Snapshot, SnapshotError, SnapshotUnsupported
from agentgym.tasks.protocol import split_tasks
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.validation import canonical
from agentgym.tasks.spec import TaskSpec



class _StepInfoRequired(TypedDict):
    task_id: str  # content hash of the TaskSpec being played
    instruction: str  # the goal, in words, as shown to the agent
    # hashable canonical state key: equal keys mean the same environment state (GiGPO groups steps
    # by it); prefer a hash of the true state over the observation text
    anchor: Any
    admissible_actions: list[str] | None  # the valid actions, or None where the action space is open
    action_valid: bool  # the last action was understood and executed (True after reset)
    success: bool  # the task is solved
    score: float  # partial credit in [0, 1]; 1.0 on success


class StepInfo(_StepInfoRequired, total=False):
    """The `info` dict of every `reset` and `step` of a TextEnv: the required keys (a missing one is
    an environment bug, raised by TextEnv) and the optional ones below; an env may add its own."""

    progress: float  # verifiable sub-goal progress in [0, 1], where the env can tell


INFO_KEYS = tuple(_StepInfoRequired.__annotations__)  # the keys every info carries, checked on each call


class AnyText(gym.spaces.Text):
    """A Text space that contains every Python string.

    gymnasium's Text only accepts characters of its charset; text environments can emit any
    character (user queries, file contents, unicode), so membership is just `isinstance(str)`.
    `sample()` still draws from the default alphanumeric charset."""

    def __init__(self, max_length: int = 1 << 20):
        super().__init__(max_length=max_length, min_length=0)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length


def task_from_dict(task: dict, where: str) -> TaskSpec:
    """A task given as a dict (TaskSpec.to_dict's shape); `where` names it in the one-line error."""
    try:
        return TaskSpec.from_dict(task)
    except (KeyError, TypeError, ValueError) as exc:
        raise TaskParamError(f"{where} is not a task ({type(exc).__name__}: {exc}): pass a TaskSpec, a task id, or "
                             '{"env_id": ..., "params": {...}, "seed": N}') from None


class TextEnv(gym.Env[str, str]):
    """The base class of every agentgym environment: a Gymnasium `Env` whose observations and
    actions are strings, one task (a `TaskSpec`) per episode.

    The main API methods users of this class need to know are:

    - :meth:`reset` - `reset(seed=None, options={"task": TASK})` starts an episode of TASK, a
      `TaskSpec`, a task id, a task dict, or None (a train task drawn with the env's RNG). Returns
      `(observation, info)`. The same task and seed give the same initial state, byte for byte.
    - :meth:`step` - `step(action)` plays one action. Returns `(observation, reward, terminated,
      truncated, info)`. Any string is a legal input: an action the env cannot parse or execute
      returns a helpful observation (e.g. "Nothing happens."), `info["action_valid"] = False`,
      and never raises. Rewards are sparse by default (the score at the final step, 0 before).
    - :meth:`render` - the last observation ("ansi" returns it, "human" prints it).

    Every `info` is a `StepInfo`: `task_id`, `instruction`, `anchor`, `admissible_actions`,
    `action_valid`, `success`, `score` always (a missing key raises: an environment bug), and
    `progress` where the env can tell. Trainers group steps by `anchor` (GiGPO), and mask or
    penalise `action_valid = False`.

    Attributes:
        observation_space, action_space: `AnyText()` (every string).
        task_space: the family's `TaskSpace` (sample, solve, category, splits; optional hooks such
            as `idle_commands`), shared by all envs of the id.
        rules: the rules of the game and the action grammar, shown to LLM agents by `ChatEnv`.
        action_parser: the action format the rules describe ("tag", "raw", "json").
        task: the `TaskSpec` being played (None before the first reset).

    A family subclasses TextEnv and implements two methods:

    - :meth:`_reset` - `_reset(task)` builds the initial state of a resolved `TaskSpec`.
    - :meth:`_step` - `_step(action)` plays one action string.

    and registers its id with `gymnasium.register("agentgym/Name-v0", entry_point=...,
    max_episode_steps=N)`; `gymnasium.utils.env_checker.check_env` passes on every registered id.

    Snapshots (what tree rollouts branch from; agentgym.snapshot):

    - :meth:`snapshot` - the episode's current state as a `Snapshot`: data (JSON), never a
      pickle or code. It carries the env id, the family's `snapshot_version`, the task id, the
      steps played since reset, the last observation and the family's state (`_get_state`).
    - :meth:`restore` - `restore(snapshot)` puts the env back in that state. The env must have
      been reset with the snapshot's task (restoring moves an episode, it never changes the task).
      Another env id, another version or another task is refused in one line (`SnapshotError`),
      and so is a truncated or hand-edited state the family finds impossible; a refused restore
      changes nothing. After a restore, the same actions give the same observations, rewards,
      flags and infos as after the snapshot (`agentgym.snapshot.check_snapshot`, a property test
      every built-in id passes). Gymnasium's TimeLimit sits above the env: restore through
      `agentgym.snapshot.restore(env, snapshot)`, which also sets its step count.

    A family opts in by setting `snapshot_version` (bump it when its state's layout changes) and
    implementing two more methods:

    - :meth:`_get_state` - the state that actions change, as a JSON object (what `_reset(task)`
      rebuilds from the task need not be in it).
    - :meth:`_set_state` - `_set_state(state)` validates every part of `state` first (raising
      SnapshotError, built with agentgym.snapshot's `need*` helpers, without changing anything)
      and only then assigns it. The env has been reset with the snapshot's task.

    A family that cannot snapshot (a live browser, a remote server) overrides
    :meth:`snapshot_refusal` to say why in one line; branching then refuses with that line.
    """

    metadata: ClassVar[dict] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    #: The family's task space; set by subclasses (an instance, shared by all envs of the id).
    task_space: TaskSpace
    #: The rules of the game and the action grammar, shown to LLM agents by ChatEnv.
    rules: ClassVar[str] = ""
    #: The action format the rules describe, the name of a parser in agentgym.parsing ("tag":
    #: `<action>...</action>`, "raw": the bare reply, "json": a JSON tool call); ChatEnv uses it
    #: unless given another parser.
    action_parser: ClassVar[str] = "tag"
    #: The layout version of this family's snapshot state; None: the family has no snapshots.
    snapshot_version: ClassVar[int | None] = None

    def __init__(self, render_mode: str | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.task: TaskSpec | None = None
        self._last_obs = ""
        self.steps_played = 0  # actions since reset (snapshots carry it; TimeLimit resumes from it)

    # --- to implement -----------------------------------------------------------------------
    def _reset(self, task: TaskSpec) -> tuple[str, StepInfo]:
        """Build the initial state of `task` (resolved and canonical); return (observation, info
        with every required `StepInfo` key, `action_valid` True)."""
        raise NotImplementedError

    def _step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:
        """Play `action` (any string; `step` has turned None into "") in the current state and
        return (observation, reward, terminated, truncated, info).

        Never raise on the action's content: an action that cannot be parsed or executed leaves the
        state as it is and returns a helpful observation with `info["action_valid"] = False`.
        terminated: the episode ended by the task (solved, or failed for good); truncated: by a
        limit the env itself enforces (the step limit is usually gymnasium's TimeLimit wrapper,
        from `max_episode_steps`). info: every required `StepInfo` key, `score` and `success`
        as of after this action."""
        raise NotImplementedError

    def _get_state(self) -> dict:
        """The state actions have changed since `_reset`, as a JSON object (see the class docstring)."""
        raise SnapshotUnsupported(self.snapshot_refusal())

    def _set_state(self, state: dict) -> None:
        """Validate `state` (one-line SnapshotError, nothing changed), then put the env in it."""
        raise SnapshotUnsupported(self.snapshot_refusal())

    def snapshot_refusal(self) -> str:
        """Why this env has no snapshots, in one line (families that cannot snapshot say why)."""
        return (f"{type(self).__name__} does not implement snapshots (snapshot_version, _get_state and _set_state; "
                "see agentgym.core.TextEnv), so its episodes cannot be branched or restored")

    def snapshot_supported(self) -> bool:
        return self.snapshot_version is not None and type(self)._get_state is not TextEnv._get_state

    # --- Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, StepInfo]:
        super().reset(seed=seed)
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise TaskParamError(f'reset options must be a dict such as {{"task": TASK}}, got {type(options).__name__}')
        unknown = sorted(set(options) - {"task"})
        if unknown:
            raise TaskParamError(f'unknown reset options {unknown}: the only option is "task" '
                                 '(a TaskSpec, a task id, a task dict, or None for a random train task)')
        self.task = self.resolve_task(options.get("task"))
        obs, info = self._reset(self.task)
        self._last_obs = self._checked_observation(obs)
        self.steps_played = 0
        return obs, self._checked(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:
        if self.task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        obs, reward, terminated, truncated, info = self._step(action)
        self._last_obs = self._checked_observation(obs)
        self.steps_played += 1
        return obs, float(reward), bool(terminated), bool(truncated), self._checked(info)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_obs
        if self.render_mode == "human":
            print(self._last_obs)
        return None

    def snapshot(self) -> Snapshot:
        """The current state of the episode as data (see the class docstring)."""
        if not self.snapshot_supported():
            raise SnapshotUnsupported(self.snapshot_refusal())
        if self.task is None:
            raise SnapshotError("reset() the env before taking a snapshot: there is no episode yet")
        return Snapshot(self.snapshot_id(), int(self.snapshot_version), self.task.task_id, self.steps_played,
                        self._last_obs, self._get_state())

    def restore(self, snapshot: Snapshot) -> None:
        """Put the env in `snapshot`'s state; refused in one line (nothing changed) when it is not
        this env's, version's or task's, or its state is impossible."""
        if not self.snapshot_supported():
            raise SnapshotUnsupported(self.snapshot_refusal())
        if not isinstance(snapshot, Snapshot):
            raise SnapshotError(f"restore takes a Snapshot (Snapshot.from_json reads a file), got {type(snapshot).__name__}")
        if self.task is None:
            raise SnapshotError(f"reset() the env with task {snapshot.task_id} before restoring its snapshot")
        here = self.snapshot_id()
        if snapshot.env_id != here:
            raise SnapshotError(f"the snapshot is of {snapshot.env_id}, this env is {here}: restore it into a {snapshot.env_id} env")
        if snapshot.version != self.snapshot_version:
            raise SnapshotError(f"the snapshot has state version {snapshot.version}, {type(self).__name__} reads version "
                                f"{self.snapshot_version}: take the snapshot again with this version")
        if snapshot.task_id != self.task.task_id:
            raise SnapshotError(f"the snapshot is of task {snapshot.task_id}, this env plays {self.task.task_id}: "
                                f"reset it with task {snapshot.task_id} first")
        self._set_state(snapshot.state)
        self.steps_played = snapshot.steps
        self._last_obs = snapshot.observation

    def snapshot_id(self) -> str:
        """The id snapshots name: the registered id this env was made under, else its task space's."""
        if self.spec is not None:
            return self.spec.id
        return getattr(self.task_space, "env_id", "") or type(self).__qualname__

    # --- helpers ----------------------------------------------------------------------------
    def resolve_task(self, task: TaskSpec | str | dict | None) -> TaskSpec:
        """A TaskSpec from what the caller passed; with none, a train task drawn with np_random."""
        if task is None:
            train = split_tasks(self.task_space, "train")
            return train[int(self.np_random.integers(len(train)))]
        if isinstance(task, str):
            return self.task_space.find(task)
        if isinstance(task, dict):
            task = task_from_dict(task, "options['task']")
        if isinstance(task, TaskSpec):
            return canonical(self.task_space, task)
        raise TaskParamError(f"options['task'] must be a TaskSpec, a task id, a task dict or None (pass one of those), "
                             f"got {type(task).__name__}")

    @staticmethod
    def _checked_observation(obs: str) -> str:
        if not isinstance(obs, str):
            raise TypeError(f"environment bug: the observation must be a str, got {type(obs).__name__}")
        return obs

    @staticmethod
    def _checked(info: dict) -> StepInfo:
        missing = [k for k in INFO_KEYS if k not in info]
        if missing:
            raise KeyError(f"environment bug: info is missing {missing}")
        return info

