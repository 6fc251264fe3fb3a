"""Where environments run during a rollout, behind one interface.

An executor owns `num_envs` ChatEnv slots and answers batched reset/step requests with one
`EnvResult` per request. A slot whose environment raised, or whose worker process died,
answers with `error` set; the rollout engine marks that episode `infra_error` and goes on.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from agentgym.tasks.spec import TaskSpec

EnvFactory = Callable[[], Any]  # returns a ChatEnv; must be picklable for the process executor


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


def make_executor(kind, factory: EnvFactory, num_envs: int, num_workers: int = 2, options: dict | None = None):
    """kind: "inprocess", "process", "ray" (agentgym.executors_ray; `options` are RayConfig
    fields), or an object with `executor_for(factory, num_envs)` such as a RayEnvPool."""
    if hasattr(kind, "executor_for"):
        return kind.executor_for(factory, num_envs)
    if kind == "inprocess":
        return InProcessExecutor(factory, num_envs)
    if kind == "process":
        return ProcessExecutor(factory, num_envs, num_workers=num_workers)
    if kind == "ray":
        from agentgym.executors_ray import make_ray_executor

        return make_ray_executor(factory, num_envs, num_workers, options)
    from agentgym.errors import ConfigError

    raise ConfigError(f"unknown executor {kind!r}; choose 'inprocess', 'process' or 'ray'")
