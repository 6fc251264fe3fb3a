"""Env snapshots: an episode's state as data, restored to replay or branch from it.

A `Snapshot` is JSON: the env id, the family's snapshot version, the task id, the steps played
since reset, the last observation and the family's own state (a JSON object that the family
validates before it changes anything). Never a pickle, never code: a snapshot file from
anywhere can be read without running anything, and a truncated, foreign or hand-edited one is
refused in one line (`SnapshotError`) with the env unchanged.

    snap = snapshot(env)                 # env: a TextEnv, or any wrapper chain around one
    text = snap.to_json()                # to a file, a queue, another process
    restore(env2, Snapshot.from_json(text))  # env2 was reset with the same task

`snapshot` / `restore` here go through the wrappers: gymnasium's TimeLimit resumes from the
snapshot's step count, so a restored episode ends where the original would have. ChatEnv adds its
conversation (`ChatEnv.snapshot()`). `check_snapshot(env)` is the property every built-in family
passes: restore a state, replay the same actions, and get identical observations, infos and rewards.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from agentgym.errors import AgentGymError

FORMAT = "agentgym-snapshot/1"
_FIELDS = ("format", "env_id", "version", "task_id", "steps", "observation", "state")


class SnapshotError(AgentGymError, ValueError):
    """A snapshot that cannot be taken or restored here; the env is unchanged."""


class SnapshotUnsupported(SnapshotError, NotImplementedError):
    """The env does not implement the snapshot contract (TextEnv._get_state / _set_state)."""


@dataclass(frozen=True)
class Snapshot:
    """One state of one episode, as data. `state` is the family's JSON object (TextEnv._get_state)."""

    env_id: str
    version: int
    task_id: str
    steps: int  # actions played since reset: a restored TimeLimit counts on from here
    observation: str  # the last observation (what render() shows)
    state: dict = field(repr=False)
    format: str = FORMAT

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in _FIELDS}

    def to_json(self) -> str:
        # keys keep their order: a family's state may print it (ToolUse shows app records as stored)
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    @property
    def nbytes(self) -> int:
        """The size of its JSON in bytes (what a file or a queue holds)."""
        return len(self.to_json().encode("utf-8", "surrogatepass"))

    @classmethod
    def from_dict(cls, d: Any) -> "Snapshot":
        if not isinstance(d, dict):
            raise SnapshotError(f"a snapshot is a JSON object with {', '.join(_FIELDS)}; got {type(d).__name__}")
        missing = [k for k in _FIELDS if k not in d]
        if missing:
            raise SnapshotError(f"the snapshot lacks {', '.join(missing)}: it is truncated or not an agentgym snapshot")
        extra = sorted(set(d) - set(_FIELDS))
        if extra:
            raise SnapshotError(f"the snapshot has unknown fields {extra}: it was edited or comes from a newer agentgym")
        if d["format"] != FORMAT:
            raise SnapshotError(f"snapshot format {d['format']!r} is not {FORMAT!r}: take the snapshot again with this agentgym")
        types = {"env_id": str, "task_id": str, "observation": str, "state": dict}
        for name, kind in types.items():
            if not isinstance(d[name], kind):
                raise SnapshotError(f"snapshot field {name} must be a {kind.__name__}, got {type(d[name]).__name__}")
        for name in ("version", "steps"):
            if not isinstance(d[name], int) or isinstance(d[name], bool) or d[name] < 0:
                raise SnapshotError(f"snapshot field {name} must be a non-negative integer, got {d[name]!r}")
        return cls(d["env_id"], d["version"], d["task_id"], d["steps"], d["observation"], d["state"])

    @classmethod
    def from_json(cls, text: str | bytes) -> "Snapshot":
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"the snapshot is not valid JSON ({exc}): the file is truncated or not a snapshot") from None
        return cls.from_dict(data)


# --- helpers for families' _set_state: check before changing anything -------------------------
def need(ok: bool, what: str) -> None:
    """Refuse a snapshot state in one line unless `ok`."""
    if not ok:
        raise SnapshotError(f"the snapshot's state is impossible for this env: {what}")


def need_keys(state: Any, keys: Sequence[str]) -> dict:
    need(isinstance(state, dict), f"state must be an object, got {type(state).__name__}")
    missing = [k for k in keys if k not in state]
    extra = sorted(set(state) - set(keys))
    need(not missing and not extra, f"state keys must be {sorted(keys)} (missing {missing}, unknown {extra})")
    return state


def need_int(value: Any, low: int, high: int, what: str) -> int:
    need(isinstance(value, int) and not isinstance(value, bool) and low <= value <= high,
         f"{what} must be an integer in [{low}, {high}], got {value!r}")
    return value


def need_bool(value: Any, what: str) -> bool:
    need(isinstance(value, bool), f"{what} must be true or false, got {value!r}")
    return value


def need_score(value: Any, what: str, low: float = 0.0) -> float:
    need(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
         and low <= value <= 1.0, f"{what} must be a number in [{low}, 1], got {value!r}")
    return float(value)


def need_str(value: Any, what: str) -> str:
    need(isinstance(value, str), f"{what} must be a string, got {type(value).__name__}")
    return value


def need_str_list(value: Any, what: str) -> list[str]:
    need(isinstance(value, list) and all(isinstance(v, str) for v in value), f"{what} must be a list of strings")
    return list(value)


# --- through the wrappers ------------------------------------------------------------------------
def supports_snapshots(env: Any) -> bool:
    """Whether the env under any wrappers implements the snapshot contract."""
    base = getattr(env, "unwrapped", env)
    probe = getattr(base, "snapshot_supported", None)
    return bool(probe()) if callable(probe) else False


def require_snapshots(env: Any, why: str = "branching") -> None:
    """One line when the env cannot snapshot (`why` needs it)."""
    base = getattr(env, "unwrapped", env)
    if not supports_snapshots(env):
        reason = getattr(base, "snapshot_refusal", lambda: None)() if hasattr(base, "snapshot_refusal") else None
        raise SnapshotUnsupported(reason or f"{type(base).__name__} does not implement snapshots ({why} needs them): "
                                            "implement TextEnv._get_state and _set_state (see agentgym.core)")


def _time_limits(env: Any):
    import gymnasium as gym

    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            yield env
        env = env.env


def snapshot(env: Any) -> Snapshot:
    """The snapshot of the TextEnv under `env`'s wrappers."""
    require_snapshots(env, "a snapshot")
    return env.unwrapped.snapshot()


def restore(env: Any, snap: Snapshot | dict | str) -> None:
    """Restore `snap` (a Snapshot, its dict or its JSON) into the TextEnv under `env`'s wrappers and
    set every TimeLimit on the way to the snapshot's step count."""
    if isinstance(snap, str):
        snap = Snapshot.from_json(snap)
    elif isinstance(snap, dict):
        snap = Snapshot.from_dict(snap)
    require_snapshots(env, "restoring a snapshot")
    env.unwrapped.restore(snap)
    for wrapper in _time_limits(env):
        wrapper._elapsed_steps = snap.steps


# --- the checker ------------------------------------------------------------------------------
Outcome = tuple[str, float, bool, bool, dict]


class SnapshotMismatch(AssertionError):
    """Restoring a snapshot and replaying the same actions gave something else."""


def _play(env: Any, actions: Sequence[str]) -> list[Outcome]:
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, float(reward), bool(terminated), bool(truncated), _comparable(info)))
        if terminated or truncated:
            break
    return out


def _comparable(info: dict) -> dict:
    # JSON round trip: what a trajectory file keeps (tuples and lists compare equal after it)
    return json.loads(json.dumps(info, sort_keys=True, default=repr))


def _compare(expected: list[Outcome], got: list[Outcome], where: str) -> None:
    names = ("observation", "reward", "terminated", "truncated", "info")
    if len(expected) != len(got):
        raise SnapshotMismatch(f"{where}: {len(got)} steps replayed, {len(expected)} expected (the episode ended elsewhere)")
    for t, (a, b) in enumerate(zip(expected, got)):
        for name, x, y in zip(names, a, b):
            if x != y:
                if name == "info":
                    keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
                    detail = f"keys {keys}: {[x.get(k) for k in keys]!r} then {[y.get(k) for k in keys]!r}"
                else:
                    detail = f"{str(x)[:200]!r} then {str(y)[:200]!r}"
                raise SnapshotMismatch(f"{where}: step {t} after the snapshot differs in {name}: {detail}")


def check_snapshot(env: Any, actions: Sequence[str] | None = None, *, prefix: int | None = None, task: Any = None,
                   seed: int = 0, other: Any = None, detour: Sequence[str] = ()) -> Snapshot:
    """Check the snapshot contract on `env` (a TextEnv or a wrapper chain around one) and return
    the snapshot it took.

    Resets `env` with `task` and `seed`, plays `actions[:prefix]`, takes a snapshot and sends it
    through JSON, plays the rest of the actions, then plays `detour` (actions that move the env
    elsewhere), restores, and replays the rest: every observation, reward, termination flag and
    info must be identical. With `other` (a second env of the same id), the snapshot is also
    restored into it after a reset with the same task, and the rest replayed there: a state the
    snapshot forgot shows up as a difference. Raises SnapshotMismatch naming the first difference.
    Defaults: the task space's oracle actions for `task` (a train task when None), prefix half of them.
    """
    require_snapshots(env, "check_snapshot")
    options = {"task": task} if task is not None else None
    env.reset(seed=seed, options=options)
    base = env.unwrapped
    if actions is None:
        actions = list(base.task_space.solve(base.task))
    prefix = len(actions) // 2 if prefix is None else prefix
    task = base.task
    played = _play(env, actions[:prefix])
    if played and (played[-1][2] or played[-1][3]):
        prefix = len(played)  # the episode ended inside the prefix: the snapshot is of its end
    snap = Snapshot.from_json(snapshot(env).to_json())
    rest = actions[prefix:]
    expected = _play(env, rest)
    _play(env, detour)
    restore(env, snap)
    _compare(expected, _play(env, rest), f"{snap.env_id} restored into the same env")
    if other is not None:
        other.reset(seed=seed + 1, options={"task": task})
        _play(other, detour)
        restore(other, snap)
        _compare(expected, _play(other, rest), f"{snap.env_id} restored into another env")
    return snap
