"""Serve a registered agentgym environment with OpenEnv's own HTTP/WebSocket server.

One WebSocket session (OpenEnv's `/ws`) is one environment instance; its episodes are played
with `reset` / `step` / `state` messages. The action is one string field, `action`, so
`GenericEnvClient(base_url=...).sync().step({"action": "look"})` works with no agentgym code on
the client side. The observation carries the text (`text`), and its metadata the full `info`
dict (task id, instruction, anchor, admissible actions, action_valid, success, score, progress)
plus `terminated` / `truncated`. Tasks are chosen through reset options:

    reset(task_id="1c19...")            a task of one of the env's splits, by id
    reset(split="heldout", index=3)     the 4th task of a split (OpenEnv's task API convention)
    reset(split="train", seed=7)        a task drawn from a split with the seed
    reset(task={...TaskSpec dict...})   any task of the env's task space
    reset(seed=7)                       the env's default: a train task drawn with the seed

The env's splits are also listed through OpenEnv's task routes (`/<name>/splits`, `/<name>/tasks`).
Errors a client causes (unknown task, bad option, step before reset) come back as OpenEnv error
frames with one clear message; the session stays usable.
"""

from __future__ import annotations

import json
import threading
from typing import Any, ClassVar, Optional

from agentgym.errors import AgentGymError, ConfigError, require

require("openenv", "openenv")

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app  # noqa: E402
from openenv.core.env_server.types import EnvironmentMetadata  # noqa: E402
from pydantic import Field  # noqa: E402

import numpy as np  # noqa: E402

import agentgym  # noqa: E402
from agentgym.registration import check_env_id, get_task_space  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402

#: Longest action accepted (characters); the env's own action space allows up to 1 MiB.
MAX_ACTION_CHARS = 1 << 20
RESET_OPTIONS = ("task_id", "split", "index", "task", "seed", "episode_id")


class TextAction(Action):
    """What the agent typed; any string (up to 1 MiB) is a legal action."""

    action: str = Field(..., max_length=MAX_ACTION_CHARS, description="the action text, e.g. 'go to fridge 1'")


class TextObservation(Observation):
    """The environment's text; `metadata` holds the env's full info dict."""

    text: str = Field(default="", description="what the agent sees")


class EpisodeState(State):
    env_id: str = ""
    task_id: Optional[str] = None
    instruction: str = ""
    anchor: Optional[str] = None
    done: bool = False
    success: bool = False
    score: float = 0.0


def _jsonable(obj: Any) -> Any:
    """The info dict as plain JSON (numpy scalars, tuples and sets become numbers and lists)."""
    return json.loads(json.dumps(obj, default=lambda o: o.item() if isinstance(o, np.generic) else
                                 sorted(o) if isinstance(o, (set, frozenset)) else str(o)))


class _Live:
    """Environment instances alive in this process: sessions the server has not reclaimed."""

    lock = threading.Lock()
    count = 0


class AgentGymEnvironment(Environment[TextAction, TextObservation, EpisodeState]):
    """An agentgym env behind OpenEnv's Environment interface (subclassed per env id by
    `environment_class`). The gym env is built on the first reset: OpenEnv also instantiates
    the class for stateless HTTP calls (/state, /metadata, task listing) that never play."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session has its own gym env, no shared mutable state
    ENV_ID: ClassVar[str] = ""
    ENV_KWARGS: ClassVar[dict] = {}

    def __init__(self):
        super().__init__()
        self._env = None
        self._done = False
        self._last: TextObservation | None = None
        self._state = EpisodeState(env_id=self.ENV_ID)
        self._closed = False
        with _Live.lock:
            _Live.count += 1

    # --- tasks ----------------------------------------------------------------------------
    @property
    def task_space(self):
        return get_task_space(self.ENV_ID)

    def _choose_task(self, seed, task_id, split, index, task) -> TaskSpec | None:
        space = self.task_space
        if task is not None:
            if not isinstance(task, dict):
                raise ConfigError("reset option 'task' must be a TaskSpec as a dict (env_id, params, seed)")
            return TaskSpec.from_dict(task)
        if task_id is not None:
            return space.find(str(task_id))
        if split is not None:
            tasks = space.split(str(split))
            if not tasks:
                raise ConfigError(f"split {split!r} of {self.ENV_ID} is empty")
            if index is None:
                return tasks[int(np.random.default_rng(seed).integers(len(tasks)))]
            if not isinstance(index, int) or not 0 <= index < len(tasks):
                raise ConfigError(f"index {index!r} out of range for split {split!r} ({len(tasks)} tasks)")
            return tasks[index]
        if index is not None:
            raise ConfigError("reset option 'index' needs 'split'")
        return None

    # --- OpenEnv interface ----------------------------------------------------------------
    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, task_id: Optional[str] = None,
              split: Optional[str] = None, index: Optional[int] = None, task: Optional[dict] = None,
              **unknown: Any) -> TextObservation:
        if unknown:
            raise ConfigError(f"unknown reset option(s) {sorted(unknown)}; choose from {', '.join(RESET_OPTIONS)}")
        if seed is not None and (not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
        chosen = self._choose_task(seed, task_id, split, index, task)
        if self._env is None:
            self._env = agentgym.make(self.ENV_ID, **self.ENV_KWARGS)
        obs, info = self._env.reset(seed=seed, options={"task": chosen})
        self._done = False
        self._state = EpisodeState(episode_id=episode_id, step_count=0, env_id=self.ENV_ID)
        return self._observe(obs, 0.0, False, False, info)

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        if self._env is None or self._last is None:
            raise ConfigError("call reset before step: this session has no episode yet")
        if self._done:
            # Gymnasium leaves stepping a finished episode undefined; say so and change nothing.
            meta = dict(self._last.metadata, action_valid=False)
            return TextObservation(text="The episode is over; reset to start a new one.", reward=0.0, done=True,
                                   metadata=meta)
        obs, reward, terminated, truncated, info = self._env.step(action.action)
        self._state.step_count += 1
        return self._observe(obs, reward, terminated, truncated, info)

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _Live.lock:
            _Live.count -= 1
        if self._env is not None:
            self._env.close()
            self._env = None

    def get_metadata(self) -> EnvironmentMetadata:
        meta = agentgym.registered_envs().get(self.ENV_ID, {})
        return EnvironmentMetadata(name=self.ENV_ID, description=meta.get("description") or self.ENV_ID,
                                   version=agentgym.__version__, author="agentgym")

    def _observe(self, obs: str, reward: float, terminated: bool, truncated: bool, info: dict) -> TextObservation:
        self._done = bool(terminated or truncated)
        meta = _jsonable(info)
        meta.update(terminated=bool(terminated), truncated=bool(truncated), env_id=self.ENV_ID)
        s = self._state
        s.task_id, s.instruction, s.anchor = meta.get("task_id"), meta.get("instruction", ""), meta.get("anchor")
        s.done, s.success, s.score = self._done, bool(meta.get("success")), float(meta.get("score", 0.0))
        self._last = TextObservation(text=obs, reward=float(reward), done=self._done, metadata=meta)
        return self._last

    # --- OpenEnv task API (listing only; the choice is made through reset options) --------------
    def list_splits(self) -> list[str]:
        return list(self.task_space.split_names)

    def list_tasks(self, split: str) -> list[dict]:
        return [t.to_dict() | {"task_id": t.task_id} for t in self.task_space.split(split)]

    def num_tasks(self, split: str) -> int:
        return len(self.task_space.split(split))

    def get_task(self, split: str, index: int) -> dict:
        tasks = self.task_space.split(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"index {index} out of range for split {split!r} ({len(tasks)} tasks)")
        return tasks[index].to_dict() | {"task_id": tasks[index].task_id}

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> list[dict]:
        return [t.to_dict() | {"task_id": t.task_id} for t in self.task_space.split(split)[start:stop]]


def environment_class(env_id: str, env_kwargs: dict | None = None) -> type[AgentGymEnvironment]:
    """An AgentGymEnvironment subclass bound to one registered env id (OpenEnv wants a class or
    a zero-argument factory; a class lets it read SUPPORTS_CONCURRENT_SESSIONS without building one)."""
    env_id = check_env_id(env_id)
    name = "".join(ch for ch in env_id.split("/")[-1] if ch.isalnum()) + "Environment"
    return type(name, (AgentGymEnvironment,), {"ENV_ID": env_id, "ENV_KWARGS": dict(env_kwargs or {})})


def live_sessions() -> int:
    """Environment instances not yet closed in this process (the server closes a session's env
    when its WebSocket goes away)."""
    return _Live.count


def create_app(env_id: str, max_sessions: int = 16, env_kwargs: dict | None = None):
    """The FastAPI app of OpenEnv's server for one agentgym env, plus `/agentgym/sessions`."""
    if max_sessions < 1:
        raise ConfigError(f"--max-sessions must be at least 1, got {max_sessions}")
    cls = environment_class(env_id, env_kwargs)
    app = create_fastapi_app(cls, TextAction, TextObservation, max_concurrent_envs=max_sessions,
                             env_name=cls.ENV_ID.split("/")[-1], state_cls=EpisodeState)

    @app.get("/agentgym/sessions", tags=["Health"])
    def sessions() -> dict:
        return {"env_id": cls.ENV_ID, "live": live_sessions(), "max_sessions": max_sessions}

    return app


def serve(env_id: str, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 16,
          env_kwargs: dict | None = None, log_level: str = "warning", on_ready=None) -> None:
    """Run the server in this process until interrupted."""
    import uvicorn

    app = create_app(env_id, max_sessions=max_sessions, env_kwargs=env_kwargs)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, ws_ping_interval=10.0,
                            ws_ping_timeout=10.0)
    server = uvicorn.Server(config)
    if on_ready is not None:
        app.router.on_startup.append(on_ready)
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        raise AgentGymError(f"could not serve on {host}:{port} (is the port in use?)") from exc


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`agentgym serve` in a child process on a loopback port, for tests, benchmarks and notebooks:

        with ServerProcess("agentgym/Household-v0") as server:
            env = gym.make("agentgym/OpenEnv-v0", base_url=server.base_url)
    """

    def __init__(self, env_id: str, port: int | None = None, max_sessions: int = 16, env_kwargs: dict | None = None,
                 startup_timeout_s: float = 300.0):
        self.env_id, self.max_sessions, self.env_kwargs = env_id, max_sessions, env_kwargs
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.proc = None
        self.log_path = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ServerProcess":
        import subprocess
        import sys
        import tempfile
        import time

        import httpx

        cmd = [sys.executable, "-m", "agentgym.cli", "serve", self.env_id, "--port", str(self.port),
               "--max-sessions", str(self.max_sessions)]
        if self.env_kwargs:
            cmd += ["--env-kwargs", json.dumps(self.env_kwargs)]
        log = tempfile.NamedTemporaryFile("w+", prefix="agentgym-serve-", suffix=".log", delete=False)
        self.log_path = log.name
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AgentGymError(f"`agentgym serve {self.env_id}` exited: {self.log()[-500:]}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AgentGymError(f"`agentgym serve {self.env_id}` did not answer within {self.startup_timeout_s:.0f}s")

    def log(self) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def sessions(self) -> dict:
        import httpx

        return httpx.get(self.base_url + "/agentgym/sessions", timeout=60.0).json()

    def stop(self, kill: bool = False) -> None:
        import subprocess

        if self.proc is None or self.proc.poll() is not None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
