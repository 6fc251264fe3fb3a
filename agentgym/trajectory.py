"""Step and Trajectory: the one record every rollout produces and every trainer consumes.

Token ids are the ones the policy saw and produced at generation time; they are stored as
they came and never re-derived from text, so a saved trajectory replays exactly.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from agentgym.safe_files import UnsafeFileError, read_jsonl


_SCALARS = (str, int, float, bool, type(None))
_NUMBER_LISTS = frozenset({"prompt_ids", "response_ids", "response_logprobs"})  # list[int] / list[float]


def _plain(record, skip: str | None = None) -> dict:
    """Step / Trajectory fields as a dict: scalars as they are, the token id and logprob lists
    copied in one call (their items are immutable numbers), anything else deep-copied."""
    out = {}
    for f in fields(record):
        if f.name == skip:
            continue
        value = getattr(record, f.name)
        if isinstance(value, _SCALARS):
            out[f.name] = value
        elif f.name in _NUMBER_LISTS and type(value) is list:
            out[f.name] = value.copy()
        else:
            out[f.name] = copy.deepcopy(value)
    return out


@dataclass
class Step:
    observation: str  # what the env showed before this action
    anchor: str  # canonical state key of that observation's state (GiGPO anchor groups)
    text: str = ""  # the model's full output
    action: str | None = None  # the env action parsed from text (None when it did not parse)
    action_valid: bool = False
    reward: float = 0.0
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    response_logprobs: list[float] | None = None
    # admissible-only decoding: per response token, the ids it was drawn among (None where free);
    # the update renormalizes the policy over them, as the sampler did
    response_allowed: list[list[int] | None] | None = None
    progress: float | None = None
    messages: list[dict] | None = None  # the chat prompt, for SFT and inspection
    # Asynchronous training (rollout.max_staleness > 0): the policy version (= RL updates applied)
    # whose weights generated this step; None where nobody recorded it (synchronous loop, eval).
    policy_version: int | None = None
    # Partial rollout: the weights changed during this step's episode and this step came from a
    # newer version than the episode's first step (rollout.partial_rollouts).
    partial: bool = False

    def to_dict(self) -> dict:
        """A plain dict that shares nothing mutable with the step (what `dataclasses.asdict` gives).
        Field by field: asdict's recursion visits every token id, and saving a trainer iteration's
        episodes spent over a second in it (16 episodes of 500-token prompts)."""
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Step":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Trajectory:
    task_id: str
    group_id: str
    env_id: str = ""
    seed: int | None = None
    steps: list[Step] = field(default_factory=list)
    success: bool = False
    score: float = 0.0
    terminated: bool = False
    truncated: bool = False
    infra_error: bool = False
    error: str | None = None  # why infra_error is set
    task: dict | None = None  # the TaskSpec as a dict
    instruction: str = ""
    final_observation: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def total_reward(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def num_invalid(self) -> int:
        return sum(not s.action_valid for s in self.steps)

    def to_dict(self) -> dict:
        d = _plain(self, skip="steps")
        d["steps"] = [s.to_dict() for s in self.steps]
        return d


    @classmethod
    def from_dict(cls, d: dict) -> "Trajectory":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["steps"] = [Step.from_dict(s) for s in d.get("steps", [])]
        return cls(**kw)


def save_trajectories(path: str | Path, trajectories: Iterable[Trajectory], append: bool = False) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as f:
        for t in trajectories:
            f.write(json.dumps(t.to_dict(), ensure_ascii=False) + "\n")


TRAJECTORY_LINE = '{"task_id": ..., "group_id": ..., "steps": [{...}, ...], ...}'  # shown in errors


class TrajectoryFileError(UnsafeFileError, ValueError):
    """A trajectories file that cannot be read: missing, not a regular file, or a line that is not
    a trajectory. Both an OSError and a ValueError, as the open and JSON errors it replaces were."""


def _trajectory(obj: Any) -> Trajectory:
    if not isinstance(obj, dict):
        raise TypeError(f"a JSON object was expected, not {type(obj).__name__}")
    steps = obj.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise TypeError("its steps must be a list of JSON objects")
    return Trajectory.from_dict(obj)


def iter_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """The trajectories of a JSONL file `save_trajectories` wrote, one at a time. A file that cannot
    be read, or a line that is not a trajectory, is one TrajectoryFileError line naming the file
    and line (a FIFO is refused, never waited on)."""
    for _, trajectory in read_jsonl(path, "trajectory", TRAJECTORY_LINE,
                                    _trajectory, error=TrajectoryFileError, file_label="trajectories file"):
        yield trajectory


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """All trajectories of a JSONL file `save_trajectories` wrote (see iter_trajectories)."""
    return list(iter_trajectories(path))
