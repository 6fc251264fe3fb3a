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
Errors a client causes (unknown task, bad option, step before reset, a frame that is not a JSON
object) come back as OpenEnv error frames with one clear message; the session stays usable.

Exposure (the server runs agent-chosen actions, in SWE's case shell commands in a sandbox):

* Loopback only by default: a request whose `Host` is not a loopback name (DNS rebinding) or
  whose `Origin` is not a loopback page (a website in the user's browser) is refused, HTTP and
  WebSocket alike; `allow_remote=True` (`agentgym serve --allow-remote`) accepts any `Host`,
  and `allowed_origins` adds pages that may connect. A request with more than one `Host` header is
  refused (HTTP 400) whichever HTTP parser uvicorn runs (h11, or httptools where it is installed).
* Held-out tasks are neither listed nor played for other machines: the task routes list
  `heldout*` splits only to loopback clients, and `reset` refuses a remote client a held-out task
  however it is named (split and index, task id, a TaskSpec dict, a relabelled copy) with HTTP 403
  / an error frame, unless the operator passes `serve_heldout=True` (`--serve-heldout`): their
  tasks (for SWE: the names of the hidden tests) would otherwise leave the machine.
* A reset a client gets wrong (unknown option, task or split, bad index) is HTTP 400 with one
  line of at most MAX_ERROR_CHARS, never a 500 with a traceback that echoes its values to the log.
* Sessions: at most `max_sessions`; a session nobody is connected to is freed after
  `idle_timeout_s` without activity (sessions made by `POST /mcp openenv/session/create`
  included), and one attached with `/ws?session_id=` is freed when that WebSocket closes.
"""

from __future__ import annotations

import contextvars
import json
import threading
from typing import Any, ClassVar, Optional
from urllib.parse import urlsplit

from agentgym.errors import AgentGymError, ConfigError, require
from agentgym.hosts import check_bind, check_host, host_name, is_loopback

require("openenv", "openenv")

from openenv.core.env_server import Action, Environment, Observation, State  # noqa: E402
from openenv.core.env_server.http_server import HTTPEnvServer  # noqa: E402
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata  # noqa: E402
from pydantic import Field  # noqa: E402

import numpy as np  # noqa: E402

import agentgym  # noqa: E402
from agentgym.registration import check_env_id, get_task_space  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402

#: Longest action accepted (characters); the env's own action space allows up to 1 MiB.
MAX_ACTION_CHARS = 1 << 20
#: Longest client-error message (a client's bad values are echoed at most this far).
MAX_ERROR_CHARS = 300
RESET_OPTIONS = ("task_id", "split", "index", "task", "seed", "episode_id")
# set per request by _Guard: whether it comes from this machine (held-out splits are listed then)
_LOCAL_REQUEST: contextvars.ContextVar[bool] = contextvars.ContextVar("agentgym_local_request", default=True)
_IN_WEBSOCKET: contextvars.ContextVar[bool] = contextvars.ContextVar("agentgym_in_websocket", default=False)


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
    SERVE_HELDOUT: ClassVar[bool] = False  # play held-out tasks for remote clients too (--serve-heldout)

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
        try:
            if unknown:
                raise ConfigError(f"unknown reset option(s) {_short(sorted(unknown))}; choose from "
                                  f"{', '.join(RESET_OPTIONS)}")
            if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
                raise ConfigError(f"seed must be a non-negative integer, got {_short(seed)}")
            chosen = self._choose_task(seed, task_id, split, index, task)
            self._refuse_heldout(chosen, split)
        except (AgentGymError, ValueError, TypeError, KeyError, IndexError) as exc:
            raise _client_error(exc) from None
        if self._env is None:
            self._env = agentgym.make(self.ENV_ID, **self.ENV_KWARGS)
        try:
            obs, info = self._env.reset(seed=seed, options={"task": chosen})
        except (AgentGymError, ValueError, TypeError, KeyError) as exc:  # a task the env cannot play
            raise _client_error(exc) from None
        self._done = False
        self._state = EpisodeState(episode_id=episode_id, step_count=0, env_id=self.ENV_ID)
        return self._observe(obs, 0.0, False, False, info)

    def _refuse_heldout(self, chosen: TaskSpec | None, split: Any) -> None:
        """Held-out tasks are played for this machine's clients only, unless SERVE_HELDOUT."""
        if self.SERVE_HELDOUT or _LOCAL_REQUEST.get():
            return
        from agentgym.tasks.splits import is_heldout
        from agentgym.tasks.validation import heldout_keys, reserved_rule

        space = self.task_space
        if (split is not None and _is_heldout_split(str(split))) or (
                chosen is not None and is_heldout(chosen, heldout_keys(space), reserved_rule(space))):
            raise _HeldoutRefused("held-out tasks are played for this machine only (the operator can start the "
                                  "server with --serve-heldout to serve them to others): use the train split")

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
        return [n for n in self.task_space.split_names if _LOCAL_REQUEST.get() or not _is_heldout_split(n)]

    def _listed(self, split: str) -> list[TaskSpec]:
        if not _LOCAL_REQUEST.get() and _is_heldout_split(str(split)):
            from fastapi import HTTPException

            raise HTTPException(status_code=404, detail=f"split {split!r} is listed to this machine only")
        return self.task_space.split(split)

    def list_tasks(self, split: str) -> list[dict]:
        return [t.to_dict() | {"task_id": t.task_id} for t in self._listed(split)]

    def num_tasks(self, split: str) -> int:
        return len(self._listed(split))

    def get_task(self, split: str, index: int) -> dict:
        tasks = self._listed(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"index {index} out of range for split {split!r} ({len(tasks)} tasks)")
        return tasks[index].to_dict() | {"task_id": tasks[index].task_id}

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> list[dict]:
        return [t.to_dict() | {"task_id": t.task_id} for t in self._listed(split)[start:stop]]


def _is_heldout_split(name: str) -> bool:
    return name.startswith("heldout")


class _HeldoutRefused(AgentGymError):
    pass


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + f"... ({len(text):,} characters)"


def _client_error(exc: Exception) -> Exception:
    """A reset error the client caused, as one bounded line: HTTP 400 (403 for a held-out task)
    on the HTTP routes, an error frame (the same line) on a WebSocket session."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + "..."
    if _IN_WEBSOCKET.get():
        return ConfigError(text)
    from fastapi import HTTPException

    return HTTPException(status_code=403 if isinstance(exc, _HeldoutRefused) else 400, detail=text)


def environment_class(env_id: str, env_kwargs: dict | None = None,
                      serve_heldout: bool = False) -> type[AgentGymEnvironment]:
    """An AgentGymEnvironment subclass bound to one registered env id (OpenEnv wants a class or
    a zero-argument factory; a class lets it read SUPPORTS_CONCURRENT_SESSIONS without building one)."""
    env_id = check_env_id(env_id)
    name = "".join(ch for ch in env_id.split("/")[-1] if ch.isalnum()) + "Environment"
    return type(name, (AgentGymEnvironment,), {"ENV_ID": env_id, "ENV_KWARGS": dict(env_kwargs or {}),
                                               "SERVE_HELDOUT": bool(serve_heldout)})


def live_sessions() -> int:
    """Environment instances not yet closed in this process (the server closes a session's env
    when its WebSocket goes away)."""
    return _Live.count


class _Server(HTTPEnvServer):
    """OpenEnv's server; a session made for a WebSocket (not through POST /mcp) counts as
    attached while that socket is open, so the idle reaper never frees a connected session."""

    async def _create_session(self):
        session_id, env = await super()._create_session()
        if _IN_WEBSOCKET.get():
            self._session_websocket_attachments.add(session_id)
        return session_id, env

    # OpenEnv runs reset / step in a thread pool, which does not carry context variables: copy
    # them, so the env sees whether the request is local (held-out tasks) and on a WebSocket.
    async def _run_sync_in_thread_pool(self, func, *args, **kwargs):
        return await super()._run_sync_in_thread_pool(contextvars.copy_context().run, func, *args, **kwargs)

    async def _run_in_session_executor(self, session_id, func, *args, **kwargs):
        return await super()._run_in_session_executor(session_id, contextvars.copy_context().run, func, *args,
                                                      **kwargs)


def _loopback_origin(origin: str) -> bool:
    try:
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and is_loopback((parts.hostname or "").lower())
    except ValueError:
        return False


class _Guard:
    """ASGI middleware in front of OpenEnv's app: Host/Origin checks, held-out listing by
    client, WebSocket frames that are not JSON objects answered without closing the session,
    sends after the client left dropped (no "Exception in ASGI application"), and a session
    attached with /ws?session_id= freed when its socket closes."""

    def __init__(self, app, server: _Server, allow_remote: bool = False, allowed_origins: tuple[str, ...] = ()):
        self.app, self.server = app, server
        self.allow_remote = allow_remote
        self.allowed_origins = {o.rstrip("/") for o in allowed_origins}

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        raw = scope.get("headers", [])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        host_local = is_loopback(host_name(headers.get("host", "")))
        origin = headers.get("origin")
        problem, status = None, 403
        if sum(k.lower() == b"host" for k, _ in raw) > 1:
            # RFC 9112 section 3.2: answered 400. uvicorn's h11 parser does so itself, httptools passes both on;
            # refused here so that the Host checks below read the one Host, whichever parser runs.
            problem, status = "a request carries one Host header; this one has several", 400
        elif not (host_local or self.allow_remote):
            problem = (f"Host {headers.get('host', '')!r} is not this machine: the server answers loopback names only "
                       "(start it with --allow-remote to serve other machines)")
        elif origin is not None and not _loopback_origin(origin) and origin.rstrip("/") not in self.allowed_origins:
            problem = f"Origin {origin!r} may not use this server (start it with --allow-origin {origin} to allow it)"
        if problem is not None:
            return await self._refuse(scope, receive, send, problem, status)
        client = (scope.get("client") or ("", 0))[0] or ""
        local = host_local and (is_loopback(client) or client in ("testclient", ""))
        token = _LOCAL_REQUEST.set(local)
        try:
            if scope["type"] == "websocket":
                return await self._websocket(scope, receive, send)
            return await self.app(scope, receive, send)
        finally:
            _LOCAL_REQUEST.reset(token)

    async def _refuse(self, scope, receive, send, problem: str, status: int = 403):
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008, "reason": problem[:120]})  # the client sees 403
            return
        body = json.dumps({"detail": problem}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _websocket(self, scope, receive, send):
        from openenv.core.env_server.types import WSErrorCode, WSErrorResponse

        gone = False

        async def safe_send(message):
            nonlocal gone
            if gone:
                return
            try:
                await send(message)
            except Exception:  # noqa: BLE001 - the client went away mid-send
                gone = True

        async def checked_receive():
            nonlocal gone
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    gone = True
                    return message
                if message["type"] != "websocket.receive":
                    return message
                text = message.get("text")
                problem = None
                if text is None:
                    problem = "binary frames are not read: send a JSON object as a text frame"
                else:
                    try:
                        parsed = json.loads(text)
                    except ValueError:
                        return message  # OpenEnv answers invalid JSON itself and keeps the session
                    except RecursionError:
                        parsed = None
                    if not isinstance(parsed, dict):
                        problem = "a message must be a JSON object with a 'type' (reset, step, state, close)"
                if problem is None:
                    return message
                error = WSErrorResponse(data={"message": problem, "code": WSErrorCode.INVALID_JSON})
                await safe_send({"type": "websocket.send", "text": error.model_dump_json()})

        token = _IN_WEBSOCKET.set(True)
        try:
            await self.app(scope, checked_receive, safe_send)
        except Exception:  # noqa: BLE001
            if not gone:
                raise
        finally:
            _IN_WEBSOCKET.reset(token)
            await self._free_attached(scope)

    async def _free_attached(self, scope) -> None:
        from urllib.parse import parse_qs

        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        for session_id in query.get("session_id", [])[:1]:
            server = self.server
            if server._sessions.get(session_id) is not None and session_id not in server._session_websocket_attachments:
                await server._destroy_session(session_id)


def create_app(env_id: str, max_sessions: int = 16, env_kwargs: dict | None = None, idle_timeout_s: float = 300.0,
               allow_remote: bool = False, allowed_origins: tuple[str, ...] | list[str] = (),
               serve_heldout: bool = False):
    """The FastAPI app of OpenEnv's server for one agentgym env, plus `/agentgym/sessions`
    (exposure rules in the module docstring)."""
    import os

    from fastapi import FastAPI

    if max_sessions < 1:
        raise ConfigError(f"--max-sessions must be at least 1, got {max_sessions}")
    if not idle_timeout_s > 0:
        raise ConfigError(f"--idle-timeout must be a number of seconds > 0, got {idle_timeout_s}")
    cls = environment_class(env_id, env_kwargs, serve_heldout=serve_heldout)
    app = FastAPI(title=f"agentgym {cls.ENV_ID} (OpenEnv)", version=agentgym.__version__)
    server = _Server(cls, TextAction, TextObservation,
                     concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions,
                                                          session_timeout=float(idle_timeout_s)),
                     env_name=cls.ENV_ID.split("/")[-1], state_cls=EpisodeState)
    server.register_routes(app, mode=os.environ.get("OPENENV_MODE", "simulation"))
    app.add_middleware(_Guard, server=server, allow_remote=allow_remote, allowed_origins=tuple(allowed_origins))

    @app.get("/agentgym/sessions", tags=["Health"])
    def sessions() -> dict:
        return {"env_id": cls.ENV_ID, "live": live_sessions(), "max_sessions": max_sessions,
                "open": len(server._sessions), "idle_timeout_s": idle_timeout_s}

    return app


def serve(env_id: str, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 16,
          env_kwargs: dict | None = None, log_level: str = "warning", on_ready=None, idle_timeout_s: float = 300.0,
          allow_remote: bool = False, allowed_origins: tuple[str, ...] | list[str] = (),
          serve_heldout: bool = False) -> None:
    """Run the server in this process until interrupted."""
    import uvicorn

    check_host(host, allow_remote, "serve")
    check_bind(host, port)
    app = create_app(env_id, max_sessions=max_sessions, env_kwargs=env_kwargs, idle_timeout_s=idle_timeout_s,
                     allow_remote=allow_remote, allowed_origins=allowed_origins, serve_heldout=serve_heldout)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, ws_ping_interval=10.0,
                            ws_ping_timeout=10.0)
    server = uvicorn.Server(config)
    if on_ready is not None:
        app.router.on_startup.append(on_ready)
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits when it cannot bind (the port was taken since check_bind)
        raise AgentGymError(f"cannot serve on {host}:{port}: uvicorn could not start (see its message above)") from exc


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
                 startup_timeout_s: float = 300.0, extra_args: list[str] | None = None):
        self.env_id, self.max_sessions, self.env_kwargs = env_id, max_sessions, env_kwargs
        self.extra_args = list(extra_args or [])
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
        cmd += self.extra_args
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
