"""TaskSpec: what to play, identified by the hash of its content.

A task is (env_id, params, seed). Two specs with equal content have the same `task_id`
wherever and whenever they are made, so ids can be compared across split files, pools
and trajectories without a registry.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the byte string the task id hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalized(obj: Any) -> Any:
    """Numbers compared by value (1.0 and 1 are the same game), containers recursively."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    if isinstance(obj, dict):
        return {str(k): _normalized(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_normalized(v) for v in obj]
    return obj


def content_key(params: Mapping[str, Any], seed: int) -> str:
    """What a task plays, without its env id and with numbers compared by value: two specs
    with the same key are the same game whatever their label or number types. Prefixed `c:`
    so keys and task ids can share one set."""
    body = canonical_json({"params": _normalized(dict(params)), "seed": int(seed)})
    return "c:" + hashlib.sha256(body.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TaskSpec:
    env_id: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError("TaskSpec.env_id must be a non-empty string")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"TaskSpec.seed must be an int, got {self.seed!r}")
        # Round-trip through JSON so that tuples become lists etc.: the spec that is hashed is
        # exactly the spec that is saved and loaded again.
        object.__setattr__(self, "params", json.loads(canonical_json(dict(self.params))))

    @property
    def task_id(self) -> str:
        # Cached by hand because the dataclass is frozen.
        cached = self.__dict__.get("_task_id")
        if cached is None:
            digest = hashlib.sha256(canonical_json(self.to_dict(with_id=False)).encode()).hexdigest()
            cached = digest[:16]
            object.__setattr__(self, "_task_id", cached)
        return cached

    @property
    def content_key(self) -> str:
        """See `content_key`: equal for relabelled or re-typed copies of the same game."""
        cached = self.__dict__.get("_content_key")
        if cached is None:
            cached = content_key(self.params, self.seed)
            object.__setattr__(self, "_content_key", cached)
        return cached

    def to_dict(self, with_id: bool = True) -> dict:
        d = {"env_id": self.env_id, "params": dict(self.params), "seed": self.seed}
        if with_id:
            d["task_id"] = self.task_id
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TaskSpec":
        if not isinstance(d, Mapping):
            raise TypeError(f"a task is a dict {{'env_id': ..., 'params': {{...}}, 'seed': N}}, got {type(d).__name__}")
        if "env_id" not in d:
            raise KeyError("env_id")
        spec = cls(env_id=d["env_id"], params=d.get("params", {}), seed=int(d.get("seed", 0)))
        if "task_id" in d and d["task_id"] != spec.task_id:
            raise ValueError(f"task_id {d['task_id']} does not match the content hash {spec.task_id}")
        return spec

    def __hash__(self) -> int:
        return hash(self.task_id)

    def __eq__(self, other) -> bool:
        return isinstance(other, TaskSpec) and other.task_id == self.task_id
