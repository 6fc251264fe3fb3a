"""Any running OpenEnv server as an agentgym TextEnv: `gym.make("agentgym/OpenEnv-v0", base_url=...)`.

The env speaks to the server through OpenEnv's own `GenericEnvClient` (one WebSocket session
per env instance), so `collect` and the trainers run on any OpenEnv environment. Mapping:

- action: the agent's text goes into one field of the action dict (`action_field`, "action" by
  default, which is what `agentgym serve` expects);
- observation: the `text_field` of the observation dict ("text" for `agentgym serve`); without
  one, the observation's only string field, or else its JSON;
- info: taken from the observation's metadata where the server provides the keys (an agentgym
  server sends them all); otherwise `anchor` is a hash of the observation (the server has no
  state key), `success` is "done with a positive reward", `score` the episode's reward clipped
  to [0, 1], `admissible_actions` None;
- tasks: a TaskSpec's params are the reset options sent to the server (e.g. {"task_id": ...} or
  {"split": "heldout", "index": 3}) and its seed the reset seed. Splits come from the server's
  OpenEnv task routes where it has them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from agentgym.core import TextEnv
from agentgym.errors import AgentGymError, ConfigError, SplitFileError, require
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec

OPENENV_ID = "agentgym/OpenEnv-v0"


class OpenEnvConnectionError(AgentGymError):
    """The OpenEnv server cannot be reached."""


def _dead(base_url: str, exc: BaseException) -> OpenEnvConnectionError:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return OpenEnvConnectionError(f"cannot reach an OpenEnv server at {base_url} ({reason[:200]}); start one, e.g. "
                                  "`agentgym serve agentgym/Household-v0 --port 8000`, and pass its URL as base_url")


def _http_json(base_url: str, path: str, payload: dict | None = None, timeout: float = 10.0) -> Any:
    import httpx

    url = base_url.rstrip("/") + path
    resp = httpx.post(url, json=payload, timeout=timeout) if payload is not None else httpx.get(url, timeout=timeout)
    resp.raise_for_status()
    return resp.json()


class OpenEnvTaskSpace(TaskSpace):
    """Tasks of a remote OpenEnv server: reset options + seed. Splits through OpenEnv's task API
    (`/<name>/splits`, `/<name>/num_tasks`); a server without it has no splits."""

    env_id = OPENENV_ID

    def __init__(self, base_url: str, env_name: str | None = None):
        self.base_url = base_url
        self.env_name = env_name

    def _name(self) -> str:
        if self.env_name is None:
            try:
                names = _http_json(self.base_url, "/list_environments")
            except Exception as exc:
                raise SplitFileError(f"the OpenEnv server at {self.base_url} lists no tasks ({exc})") from None
            if not names:
                raise SplitFileError(f"the OpenEnv server at {self.base_url} lists no environments")
            self.env_name = names[0]
        return self.env_name

    @property
    def split_names(self) -> tuple[str, ...]:  # type: ignore[override]
        try:
            splits = _http_json(self.base_url, f"/{self._name()}/splits")
        except SplitFileError:
            return ()
        except Exception:
            return ()
        return tuple(s["name"] if isinstance(s, dict) else str(s) for s in splits)

    def read_split(self, name: str) -> tuple[TaskSpec, ...]:
        cache = self.__dict__.setdefault("_split_cache", {})
        if name not in cache:
            if name not in self.split_names:
                raise SplitFileError(f"the OpenEnv server at {self.base_url} has no split {name!r} "
                                     f"(it lists: {', '.join(self.split_names) or 'none'})")
            n = int(_http_json(self.base_url, f"/{self._name()}/num_tasks", {"split": name})["num_tasks"])
            cache[name] = tuple(TaskSpec(self.env_id, {"split": name, "index": i}, seed=0) for i in range(n))
        return cache[name]

    def sample(self, rng: np.random.Generator, **_: Any) -> TaskSpec:
        """The server's own default task, with a drawn seed."""
        return TaskSpec(self.env_id, {}, seed=int(rng.integers(1 << 31)))

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        return TaskSpec(self.env_id, dict(spec.params), seed=int(rng.integers(1 << 31)))

    def solve(self, spec: TaskSpec):
        return None  # a remote env ships no oracle

    def category(self, spec: TaskSpec) -> str:
        return str(spec.params.get("split", "default"))

    def find(self, task_id: str) -> TaskSpec:
        """An id that is not one of the split tasks is sent to the server as its own task id."""
        for name in self.split_names:
            for t in self.read_split(name):
                if t.task_id == task_id:
                    return t
        return TaskSpec(self.env_id, {"task_id": task_id}, seed=0)


class OpenEnvTextEnv(TextEnv):
    """A TextEnv whose state lives in an OpenEnv server (one WebSocket session per instance)."""

    rules = "Type an action; the environment answers with text."

    def snapshot_refusal(self) -> str:
        return ("OpenEnv-v0's state lives in the remote OpenEnv server, whose protocol has no way to save or restore "
                "it (its RFC lists that as future work): snapshot and branch the env in-process instead")

    def __init__(self, base_url: str | None = None, action_field: str = "action", text_field: str | None = None,
                 env_name: str | None = None, connect_timeout_s: float = 10.0, message_timeout_s: float = 120.0,
                 render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if not base_url:
            raise ConfigError('agentgym/OpenEnv-v0 needs the server URL: gym.make("agentgym/OpenEnv-v0", '
                              'base_url="http://127.0.0.1:8000")')
        require("openenv", "openenv")
        from openenv import GenericEnvClient

        self.base_url = base_url.rstrip("/")
        self.action_field, self.text_field = action_field, text_field
        self.task_space = OpenEnvTaskSpace(self.base_url, env_name)
        self._client = GenericEnvClient(base_url=self.base_url, connect_timeout_s=connect_timeout_s,
                                        message_timeout_s=message_timeout_s).sync()
        try:
            self._client.connect()
        except Exception as exc:
            self._close_client()
            raise _dead(self.base_url, exc) from None
        self._return = 0.0
        self._steps = 0

    # --- TextEnv ----------------------------------------------------------------------------
    def resolve_task(self, task):
        if task is None:
            return self.task_space.sample(self.np_random)
        return super().resolve_task(task)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ConnectionError, OSError) as exc:
            raise _dead(self.base_url, exc) from None
        except RuntimeError as exc:
            if str(exc).startswith("Server error"):
                raise ConfigError(f"OpenEnv server at {self.base_url}: {exc}") from None
            raise

    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        options = dict(task.params)
        options.setdefault("seed", int(task.seed))
        result = self._call(self._client.reset, **options)
        self._return, self._steps = 0.0, 0
        obs, info = self._convert(result)
        return obs, info

    def _step(self, action: str):
        result = self._call(self._client.step, {self.action_field: action})
        self._steps += 1
        reward = float(result.reward or 0.0)
        self._return += reward
        obs, info = self._convert(result)
        done = bool(result.done)
        truncated = bool(info.pop("_truncated", False)) and done
        return obs, reward, done and not truncated, truncated, info

    def close(self) -> None:
        self._close_client()
        super().close()

    def _close_client(self) -> None:
        client = getattr(self, "_client", None)
        self._client = None
        if client is not None:
            try:
                client.close()
            except Exception:
                pass

    # --- mapping ----------------------------------------------------------------------------
    def _text(self, observation: dict) -> str:
        if self.text_field is not None:
            if self.text_field not in observation:
                raise ConfigError(f"the server's observation has no field {self.text_field!r}; "
                                  f"it has {sorted(observation)}")
            return str(observation[self.text_field])
        if isinstance(observation.get("text"), str):
            return observation["text"]
        strings = [v for k, v in observation.items() if isinstance(v, str) and k != "metadata"]
        if len(strings) == 1:
            return strings[0]
        return json.dumps({k: v for k, v in observation.items() if k != "metadata"}, sort_keys=True, default=str)

    def _convert(self, result) -> tuple[str, dict]:
        observation = result.observation if isinstance(result.observation, dict) else {}
        meta = dict(result.metadata or observation.get("metadata") or {})
        text = self._text(observation)
        done = bool(result.done)
        success = bool(meta.get("success", done and self._return > 0))
        info = {
            "task_id": meta.get("task_id") or (self.task.task_id if self.task is not None else ""),
            "instruction": meta.get("instruction", ""),
            # the server's state key where it sends one; otherwise what the agent can tell apart
            "anchor": meta.get("anchor") or hashlib.sha256(text.encode()).hexdigest()[:16],
            "admissible_actions": meta.get("admissible_actions"),
            "action_valid": bool(meta.get("action_valid", True)),
            "success": success,
            "score": float(meta["score"]) if "score" in meta else (1.0 if success else
                                                                   float(min(max(self._return, 0.0), 1.0))),
        }
        if "progress" in meta:
            info["progress"] = meta["progress"]
        info["_truncated"] = bool(meta.get("truncated", False))
        return text, info

    def _checked(self, info: dict) -> dict:  # type: ignore[override]
        info.pop("_truncated", None)
        return super()._checked(info)
