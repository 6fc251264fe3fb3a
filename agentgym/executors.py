"""Where environments run during a rollout, behind one interface (the `Executor` protocol).

An executor owns `num_envs` ChatEnv slots and answers batched reset/step requests with one
`EnvResult` per request. A slot whose environment raised, or whose worker process died,
answers with `error` set; the rollout engine marks that episode `infra_error` and goes on.

Executors are found by name in a registry, as Gymnasium finds envs: `register_executor(name,
builder)` where the builder is a callable or an import string "module:function" loaded on first
use (so "ray" costs nothing until asked for). Built in: "inprocess" (one slot after another),
"threads" (slots stepped concurrently by a thread pool: for envs whose step waits on I/O, a
browser or a remote server), "process" (worker processes) and "ray" (agentgym.executors_ray).
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from agentgym.errors import ConfigError
from agentgym.tasks.spec import TaskSpec

EnvFactory = Callable[[], Any]  # returns a ChatEnv; must be picklable for the process executor
ResetRequest = tuple[int, TaskSpec, "int | None"]  # (slot, task, seed)
StepRequest = tuple[int, str]  # (slot, the model's reply)


@dataclass
class EnvResult:
    obs: Any = None  # chat messages
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict | None = None
    error: str | None = None


def _short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _reset(env, task: TaskSpec, seed: int | None) -> EnvResult:
    try:
        obs, info = env.reset(seed=seed, options={"task": task})
        return EnvResult(obs=obs, info=info)
    except Exception as exc:  # an env bug or broken backend: infra error, not the agent's fault
        return EnvResult(error=_short_error(exc))


def _step(env, text: str) -> EnvResult:
    try:
        obs, reward, terminated, truncated, info = env.step(text)
        return EnvResult(obs, reward, terminated, truncated, info)
    except Exception as exc:
        return EnvResult(error=_short_error(exc))


def _close(env) -> None:
    try:
        env.close()
    except Exception:
        pass


class InProcessExecutor:
    """Runs every slot in this process, one after another: lowest overhead, no isolation.

    `release(slots)` closes those slots' envs (their episodes ended: workspaces, browsers and
    files go now, not at the end of the rollout); the next reset of a slot builds a new env."""

    def __init__(self, factory: EnvFactory, num_envs: int):
        self.factory = factory
        self.envs = [factory() for _ in range(num_envs)]

    def _env(self, i: int):
        if self.envs[i] is None:
            self.envs[i] = self.factory()
        return self.envs[i]

    def reset(self, requests: list[tuple[int, TaskSpec, int | None]]) -> list[EnvResult]:
        out = []
        for i, task, seed in requests:
            try:
                env = self._env(i)
            except Exception as exc:
                out.append(EnvResult(error=_short_error(exc)))
                continue
            out.append(_reset(env, task, seed))
        return out

    def release(self, slots: list[int]) -> None:
        for i in slots:
            if self.envs[i] is not None:
                _close(self.envs[i])
                self.envs[i] = None

    def step(self, requests: list[tuple[int, str]]) -> list[EnvResult]:
        return [_step(self.envs[i], text) for i, text in requests]

    def close(self) -> None:
        for env in self.envs:
            if env is not None:
                _close(env)


def _worker(conn, factory: EnvFactory, slots: list[int]) -> None:
    envs = {i: factory() for i in slots}

    def reset_one(i, task, seed):
        if envs.get(i) is None:
            try:
                envs[i] = factory()
            except Exception as exc:
                return EnvResult(error=_short_error(exc))
        return _reset(envs[i], task, seed)

    while True:
        try:
            cmd, payload = conn.recv()
        except (EOFError, KeyboardInterrupt):
            break
        if cmd == "reset":
            conn.send([reset_one(i, task, seed) for i, task, seed in payload])
        elif cmd == "release":
            for (i,) in payload:
                if envs.get(i) is not None:
                    _close(envs.pop(i))
            conn.send([EnvResult() for _ in payload])
        elif cmd == "step":
            conn.send([_step(envs[i], text) for i, text in payload])
        elif cmd == "close":
            for env in envs.values():
                if env is not None:
                    _close(env)
            conn.send(None)
            break


class ProcessExecutor:
    """Spreads slots over worker processes (slot i lives in worker i % num_workers).

    Requests for different workers run in parallel. A worker that dies (segfault, OOM kill,
    os._exit in an env) fails only its own slots; it is restarted at the next reset."""

    def __init__(self, factory: EnvFactory, num_envs: int, num_workers: int = 2, start_method: str = "spawn"):
        self.factory = factory
        self.num_workers = max(1, min(num_workers, num_envs))
        self.ctx = mp.get_context(start_method)
        self.slots = [[i for i in range(num_envs) if i % self.num_workers == w] for w in range(self.num_workers)]
        self.workers: list[tuple[Any, Any] | None] = [self._start(w) for w in range(self.num_workers)]

    def _start(self, w: int):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, self.factory, self.slots[w]), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _call(self, cmd: str, requests: list, restart_dead: bool) -> list[EnvResult]:
        by_worker: dict[int, list[int]] = {}
        for k, req in enumerate(requests):
            by_worker.setdefault(req[0] % self.num_workers, []).append(k)
        results: list[EnvResult | None] = [None] * len(requests)
        sent = []
        for w, ks in by_worker.items():
            if restart_dead and (self.workers[w] is None or not self.workers[w][0].is_alive()):
                self._discard(w)
                self.workers[w] = self._start(w)
            if self.workers[w] is None:
                for k in ks:
                    results[k] = EnvResult(error="environment worker is not running (it crashed earlier)")
                continue
            try:
                self.workers[w][1].send((cmd, [requests[k] for k in ks]))
                sent.append((w, ks))
            except (BrokenPipeError, OSError) as exc:
                self._fail(w, ks, results, f"environment worker died: {exc}")
        for w, ks in sent:
            try:
                answers = self.workers[w][1].recv()
                for k, ans in zip(ks, answers):
                    results[k] = ans
            except (EOFError, ConnectionResetError, OSError) as exc:
                code = self.workers[w][0].exitcode if self.workers[w] else None
                self._fail(w, ks, results, f"environment worker died (exit code {code}): {type(exc).__name__}")
        return results  # type: ignore[return-value]

    def _fail(self, w: int, ks: list[int], results: list, message: str) -> None:
        for k in ks:
            results[k] = EnvResult(error=message)
        self._discard(w)

    def _discard(self, w: int) -> None:
        if self.workers[w] is not None:
            proc, conn = self.workers[w]
            conn.close()
            proc.join(timeout=1)
            if proc.is_alive():
                proc.kill()
        self.workers[w] = None

    def reset(self, requests):
        return self._call("reset", requests, restart_dead=True)

    def step(self, requests):
        return self._call("step", requests, restart_dead=False)

    def release(self, slots: list[int]) -> None:
        self._call("release", [(i,) for i in slots], restart_dead=False)

    def close(self) -> None:
        for w, worker in enumerate(self.workers):
            if worker is None:
                continue
            proc, conn = worker
            try:
                conn.send(("close", None))
                conn.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
            self._discard(w)


class ThreadExecutor(InProcessExecutor):
    """In-process slots whose resets and steps run concurrently on `num_workers` threads.

    For envs whose step waits on I/O (the browser, a remote OpenEnv server, a sandbox command):
    the waits overlap instead of adding up. CPU-bound envs gain nothing (the GIL); use "process"."""

    def __init__(self, factory: EnvFactory, num_envs: int, num_workers: int = 8):
        super().__init__(factory, num_envs)
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(num_workers, num_envs)),
                                       thread_name_prefix="agentgym-env")

    def reset(self, requests: list[ResetRequest]) -> list[EnvResult]:
        return list(self.pool.map(lambda r: super(ThreadExecutor, self).reset([r])[0], requests))

    def step(self, requests: list[StepRequest]) -> list[EnvResult]:
        return list(self.pool.map(lambda r: _step(self.envs[r[0]], r[1]), requests))

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        super().close()


@runtime_checkable
class Executor(Protocol):
    """What the rollout engine asks of an executor. Results come back in request order."""

    def reset(self, requests: list[ResetRequest]) -> list[EnvResult]: ...

    def step(self, requests: list[StepRequest]) -> list[EnvResult]: ...

    def release(self, slots: list[int]) -> None: ...  # those slots' episodes ended: close their envs

    def close(self) -> None: ...


# builder(factory, num_envs, num_workers or None, options) -> Executor
ExecutorBuilder = Callable[[EnvFactory, int, "int | None", "dict | None"], Executor]
_EXECUTORS: dict[str, ExecutorBuilder | str] = {}
_RAY_CLUSTER: set[str] = set()  # executors whose workers are placed on the run's Ray cluster
_RUN_POOLS: dict[str, Callable[[Any], Any] | str] = {}  # name -> pool builder the trainer keeps for the run


def register_executor(name: str, builder: ExecutorBuilder | str, *, needs_ray_cluster: bool = False,
                      run_pool: Callable[[Any], Any] | str | None = None) -> None:
    """Make `executor=name` (collect, evaluate, the trainer's env.executor) build executors with
    `builder(factory, num_envs, num_workers, options)`; an import string "module:function" is
    loaded on first use.

    needs_ray_cluster=True: its workers run on the Ray cluster of a training config's `ray:`
    section; the trainer checks the cluster can place them (ray.num_workers x num_cpus_per_worker)
    before any work. run_pool: a builder (or import string) called with that `ray:` section once
    per run; what it returns (`executor_for(factory, num_envs)`, `shutdown()`) is handed to every
    rollout as the executor, so workers live across iterations instead of starting per batch."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"an executor name is a non-empty string, got {name!r}")
    _EXECUTORS[name] = builder
    _RAY_CLUSTER.discard(name)
    _RUN_POOLS.pop(name, None)
    if needs_ray_cluster:
        _RAY_CLUSTER.add(name)
    if run_pool is not None:
        _RUN_POOLS[name] = run_pool


def executor_names() -> list[str]:
    return sorted(_EXECUTORS)


def needs_ray_cluster(name: Any) -> bool:
    """Whether executor `name` runs its workers on the Ray cluster (declared at registration)."""
    return isinstance(name, str) and name in _RAY_CLUSTER


def make_run_pool(name: Any, options: Any) -> Any:
    """The run-wide pool executor `name` declared (None when it declares none): the trainer builds
    it once with its `ray:` section and passes it to collect as the executor."""
    if not isinstance(name, str) or name not in _RUN_POOLS:
        return None
    return _load(_RUN_POOLS, name)(options)


def check_executor(name: Any) -> None:
    """One line when `name` is neither a registered executor nor an executor pool object."""
    if hasattr(name, "executor_for") or name in _EXECUTORS:
        return
    raise ConfigError(f"unknown executor {name!r}; choose one of {', '.join(executor_names())} "
                      "(or register your own with agentgym.executors.register_executor)")


def _load(registry: dict, name: str) -> Callable:
    """The registered callable, an import string "module:function" loaded on first use."""
    builder = registry[name]
    if isinstance(builder, str):
        module, _, attr = builder.partition(":")
        builder = getattr(importlib.import_module(module), attr)
        registry[name] = builder
    return builder


def _builder(name: str) -> ExecutorBuilder:
    return _load(_EXECUTORS, name)


def make_executor(kind: Any, factory: EnvFactory, num_envs: int, num_workers: int | None = None,
                  options: dict | None = None) -> Executor:
    """kind: a registered name ("inprocess", "threads", "process", "ray", or your own), or an
    object with `executor_for(factory, num_envs)` such as the trainer's RayEnvPool. num_workers:
    threads / processes / Ray workers (None: the executor's default)."""
    if hasattr(kind, "executor_for"):
        return kind.executor_for(factory, num_envs)
    check_executor(kind)
    return _builder(kind)(factory, num_envs, num_workers, options)


register_executor("inprocess", lambda factory, n, _workers, _options: InProcessExecutor(factory, n))
register_executor("threads", lambda factory, n, workers, _options: ThreadExecutor(factory, n, workers or 16))
register_executor("process", lambda factory, n, workers, _options: ProcessExecutor(factory, n, num_workers=workers or 2))
register_executor("ray", "agentgym.executors_ray:make_ray_executor", needs_ray_cluster=True,
                  run_pool="agentgym.executors_ray:RayEnvPool")
