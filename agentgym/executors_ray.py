"""Env workers as Ray actors: the `executor="ray"` of `agentgym.collect` and of the trainer.

Each worker is one Ray actor (one process, on any node of the cluster) hosting several
ChatEnv slots; slot i lives on worker i % num_workers, like the process executor. A batched
reset/step sends one call per worker and waits for all of them, so workers step in parallel.

Faults: a worker whose process dies (killed, OOM, segfault) or that does not answer within
`step_timeout_s` fails only its own slots: their episodes end as `infra_error` and the rollout
goes on. The actor is created with `max_restarts=-1`, so Ray starts a fresh process for it;
the next reset sent to it waits for that process (up to max(step_timeout_s, 60 s), what a first
start is allowed; also after a silent worker was killed) and rebuilds its envs
lazily (a step sent to a slot whose env was lost answers with an error instead of silently
playing a fresh env).

Lifetime: `collect(executor="ray")` starts workers and kills them at the end. The trainer keeps
them for the whole run instead: it holds one persistent `RayEnvPool(RayConfig)`, passes it as
the executor (`collect(executor=pool)` leases slots from it, rebuilt only when the env factory
changes) and shuts it down when the run ends.

Connecting: `address=None` starts a local Ray in this process (or joins RAY_ADDRESS when set);
`"auto"` joins the cluster started on this machine with `ray start --head`; `"host:port"` or
`"ray://host:port"` a remote one. Unreachable addresses and requests for more CPUs than the
cluster has fail with one line before any worker starts (Ray itself would wait forever for
resources: the "hanging env workers" users of other frameworks report).

`ray` is imported only here and only when used; without it the error names the extra.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from agentgym.errors import ConfigError, MissingExtraError, install_hint
from agentgym.executors import EnvResult, _reset, _short_error, _step

RAY_EXTRA_HINT = install_hint("ray")


@dataclass
class RayConfig:
    """Where and how wide the Ray parts of a run are (trainer config section `ray:`)."""

    address: str | None = None  # None: local Ray in this process (or RAY_ADDRESS); "auto": `ray start --head` cluster
    num_workers: int = 2  # env-worker actors
    num_cpus_per_worker: float = 1.0  # CPUs Ray reserves per env worker (fractions allowed)
    envs_per_worker: int | None = None  # cap on live env slots per worker; None: no cap
    step_timeout_s: float = 300.0  # a worker silent this long is treated as dead
    num_cpus: int | None = None  # CPUs of a locally started Ray (None: all of this machine's)
    policy_replicas: int = 1  # policy.engine=ray: rollout-policy actors
    policy_num_cpus: float = 1.0
    policy_num_gpus: float = 0.0
    policy_engine: str = "hf"  # what each policy replica runs: "hf" (HFPolicy) or "vllm" (VLLMPolicy)


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError(f"the ray executor needs Ray, which is not installed: run `{RAY_EXTRA_HINT}` "
                                f"({exc})") from exc
    return ray


def validate_ray_config(rc: RayConfig, prefix: str = "ray.") -> None:
    """Static checks (no Ray needed): one line each."""
    if rc.num_workers < 1:
        raise ConfigError(f"{prefix}num_workers must be >= 1, got {rc.num_workers}")
    if rc.num_cpus_per_worker <= 0:
        raise ConfigError(f"{prefix}num_cpus_per_worker must be > 0, got {rc.num_cpus_per_worker}")
    if rc.envs_per_worker is not None and rc.envs_per_worker < 1:
        raise ConfigError(f"{prefix}envs_per_worker must be >= 1 or null, got {rc.envs_per_worker}")
    if rc.step_timeout_s <= 0:
        raise ConfigError(f"{prefix}step_timeout_s must be > 0, got {rc.step_timeout_s}")
    if rc.policy_replicas < 1:
        raise ConfigError(f"{prefix}policy_replicas must be >= 1, got {rc.policy_replicas}")
    if rc.policy_engine not in ("hf", "vllm"):
        raise ConfigError(f"{prefix}policy_engine={rc.policy_engine!r} is unknown; choose hf or vllm")


def _probe(address: str, timeout: float = 3.0) -> None:
    """Fail fast on an address nobody listens on (ray.init would retry for a minute or more)."""
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"ray.address={address!r} is not host:port, ray://host:port, 'auto' or null")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot reach a Ray cluster at {address} ({exc.strerror or type(exc).__name__}): start "
                          f"one there with `ray start --head`, or set ray.address=null for a local Ray") from None


def connect(rc: RayConfig) -> Any:
    """ray.init as configured (once per process); returns the ray module."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if (cpus := _new_local_cluster_cpus(rc)) is not None:
        # "local": a new Ray in this process even when another one runs on the machine
        ray.init(address="local", num_cpus=cpus, **kwargs)
        return ray
    address = rc.address if rc.address not in (None, "", "local") else os.environ["RAY_ADDRESS"]
    if address != "auto":
        _probe(address)
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"no Ray cluster at ray.address={address!r} ({first}): run `ray start --head` first, "
                          "or set ray.address=null for a local Ray") from None
    return ray


def check_resources(rc: RayConfig, with_policy: bool = False) -> dict:
    """Refuse a request the cluster cannot place: Ray would queue the actors and hang. A cluster
    this process would start itself has ray.num_cpus (or this machine's) CPUs: a request over
    that is refused before Ray starts."""
    need = rc.num_workers * rc.num_cpus_per_worker
    what = f"ray.num_workers={rc.num_workers} x ray.num_cpus_per_worker={rc.num_cpus_per_worker:g}"
    if with_policy:
        need += rc.policy_replicas * rc.policy_num_cpus
        what += f" + ray.policy_replicas={rc.policy_replicas} x ray.policy_num_cpus={rc.policy_num_cpus:g}"

    def check(have: float) -> None:
        if need > have + 1e-9:
            raise ConfigError(f"{what} = {need:g} CPUs, but the Ray cluster has {have:g}: lower them (fractions "
                              "such as num_cpus_per_worker=0.5 are allowed) or add nodes")

    if (local := _new_local_cluster_cpus(rc)) is not None:
        check(float(local))
    ray = connect(rc)
    have = float(ray.cluster_resources().get("CPU", 0.0))
    check(have)
    gpus_have = float(ray.cluster_resources().get("GPU", 0.0))
    if with_policy and rc.policy_replicas * rc.policy_num_gpus > gpus_have + 1e-9:
        raise ConfigError(f"ray.policy_replicas={rc.policy_replicas} x ray.policy_num_gpus={rc.policy_num_gpus:g} "
                          f"GPUs, but the Ray cluster has {gpus_have:g}")
    return {"cpus": have, "gpus": gpus_have, "cpus_requested": need}


def _new_local_cluster_cpus(rc: RayConfig) -> int | None:
    """The CPUs of the local cluster `connect` would start for `rc`; None when it would join a
    running one (ray.address, RAY_ADDRESS, or a Ray already started in this process)."""
    if rc.address not in (None, "", "local") or os.environ.get("RAY_ADDRESS"):
        return None
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return None
    return rc.num_cpus or os.cpu_count() or 1


# --- the actor ---------------------------------------------------------------------------------
class EnvWorker:
    """One env-worker process: builds ChatEnvs from the factory for the slots it is asked for."""

    def __init__(self, factory):
        self.factory = factory
        self.envs: dict[int, Any] = {}

    def ready(self) -> int:
        return os.getpid()

    def reset(self, requests):
        out = []
        for slot, task, seed in requests:
            env = self.envs.get(slot)
            if env is None:
                try:
                    env = self.envs[slot] = self.factory()
                except Exception as exc:
                    out.append(EnvResult(error=f"building the env failed: {_short_error(exc)}"))
                    continue
            out.append(_reset(env, task, seed))
        return out

    def step(self, requests):
        out = []
        for slot, text in requests:
            env = self.envs.get(slot)
            if env is None:  # the actor was restarted mid-episode: its state is gone
                out.append(EnvResult(error="environment worker was restarted; the episode's state is lost"))
            else:
                out.append(_step(env, text))
        return out

    def release(self, requests) -> list[EnvResult]:
        """Close the envs of these slots (their episodes ended); the next reset builds new ones."""
        for (slot,) in requests:
            env = self.envs.pop(slot, None)
            if env is not None:
                try:
                    env.close()
                except Exception:
                    pass
        return [EnvResult() for _ in requests]

    def close(self) -> None:
        for env in self.envs.values():
            try:
                env.close()
            except Exception:
                pass
        self.envs.clear()


def _actor_class(ray, rc: RayConfig):
    return ray.remote(num_cpus=rc.num_cpus_per_worker, max_restarts=-1, max_task_retries=0)(EnvWorker)


class RayExecutor:
    """The executor interface (reset/step/close) over `num_workers` EnvWorker actors."""

    def __init__(self, factory, num_envs: int, rc: RayConfig | None = None, keep_alive: bool = False):
        rc = rc or RayConfig()
        validate_ray_config(rc)
        self.rc = rc
        self.ray = connect(rc)
        self.num_workers = max(1, min(rc.num_workers, num_envs))
        if rc.envs_per_worker is not None and num_envs > self.num_workers * rc.envs_per_worker:
            raise ConfigError(f"this rollout needs {num_envs} live envs but ray.num_workers={rc.num_workers} x "
                              f"ray.envs_per_worker={rc.envs_per_worker} allow {self.num_workers * rc.envs_per_worker}: "
                              "raise them or collect fewer episodes at once")
        check_resources(RayConfig(**{**rc.__dict__, "num_workers": self.num_workers}))
        self.factory = factory
        self.num_envs = num_envs
        self.keep_alive = keep_alive
        cls = _actor_class(self.ray, rc)
        self.workers = [cls.remote(factory) for _ in range(self.num_workers)]
        try:
            self.pids = self.ray.get([w.ready.remote() for w in self.workers], timeout=max(rc.step_timeout_s, 60))
        except self.ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise ConfigError(f"{self.num_workers} env workers did not start within {max(rc.step_timeout_s, 60):g}s: "
                              "the cluster's CPUs are probably held by other actors (lower ray.num_cpus_per_worker)") from None
        self.restarts = 0
        self.recycled: set[int] = set()  # workers killed for silence whose new process has not answered yet

    def resize(self, num_envs: int) -> None:
        """Serve a rollout of `num_envs` slots with the existing workers (persistent pool)."""
        if self.rc.envs_per_worker is not None and num_envs > self.num_workers * self.rc.envs_per_worker:
            raise ConfigError(f"this rollout needs {num_envs} live envs but ray.num_workers={self.num_workers} x "
                              f"ray.envs_per_worker={self.rc.envs_per_worker} allow "
                              f"{self.num_workers * self.rc.envs_per_worker}: raise them or collect fewer episodes")
        self.num_envs = num_envs

    def worker_of(self, slot: int) -> int:
        return slot % self.num_workers

    def _call(self, method: str, requests: list) -> list[EnvResult]:
        ray = self.ray
        by_worker: dict[int, list[int]] = {}
        for k, req in enumerate(requests):
            by_worker.setdefault(self.worker_of(req[0]), []).append(k)
        for w in self.recycled & set(by_worker):  # new episodes on a recycled worker: wait for its new process
            if method == "reset" and self._wait_for_restart(w, count=False):
                self.recycled.discard(w)
        refs = {w: getattr(self.workers[w], method).remote([requests[k] for k in ks]) for w, ks in by_worker.items()}
        results: list[EnvResult | None] = [None] * len(requests)
        deadline = time.monotonic() + self.rc.step_timeout_s
        for w, ks in by_worker.items():
            try:
                answers = ray.get(refs[w], timeout=max(deadline - time.monotonic(), 0.001))
            except ray.exceptions.GetTimeoutError:
                self._recycle(w)
                answers = [EnvResult(error=f"environment worker {w} did not answer within {self.rc.step_timeout_s:g}s "
                                           "(restarted)")] * len(ks)
            except ray.exceptions.RayError as exc:  # ActorDiedError, ActorUnavailableError, ...
                answers = None
                if method == "reset" and self._wait_for_restart(w):  # new episodes: wait for the new process
                    try:
                        answers = ray.get(self.workers[w].reset.remote([requests[k] for k in ks]),
                                          timeout=self.rc.step_timeout_s)
                    except ray.exceptions.RayError:
                        answers = None
                if answers is None:
                    self.restarts += 1
                    answers = [EnvResult(error=f"environment worker {w} died ({type(exc).__name__}); Ray restarts "
                                               "it")] * len(ks)
            for k, ans in zip(ks, answers):
                results[k] = ans
        return results  # type: ignore[return-value]

    def _wait_for_restart(self, w: int, count: bool = True) -> bool:
        """Poll a dead or restarting worker until Ray has a new process for it (or time runs out:
        a process start is allowed what the first start was, not just one step's time)."""
        ray = self.ray
        deadline = time.monotonic() + max(self.rc.step_timeout_s, 60)
        while time.monotonic() < deadline:
            try:
                self.pids[w] = ray.get(self.workers[w].ready.remote(), timeout=max(deadline - time.monotonic(), 0.001))
                self.restarts += count
                return True
            except ray.exceptions.GetTimeoutError:
                return False
            except ray.exceptions.RayError:
                time.sleep(0.1)
        return False

    def _recycle(self, w: int) -> None:
        """A hung worker: kill it and let Ray start a fresh process in its place."""
        self.restarts += 1
        self.recycled.add(w)
        try:
            self.ray.kill(self.workers[w], no_restart=False)
        except Exception:
            pass

    def reset(self, requests):
        return self._call("reset", requests)

    def step(self, requests):
        return self._call("step", requests)

    def release(self, slots: list[int]) -> None:
        self._call("release", [(i,) for i in slots])

    def close(self) -> None:
        if self.keep_alive:
            return
        self.shutdown()

    def shutdown(self) -> None:
        for w in self.workers:
            try:
                self.ray.kill(w, no_restart=True)
            except Exception:
                pass
        self.workers = []


class RayEnvPool:
    """Persistent env workers for many rollouts (the trainer): `executor_for(factory, n)` returns
    the executor, restarting the workers only when the factory changes."""

    def __init__(self, rc: RayConfig):
        validate_ray_config(rc)
        self.rc = rc
        self._executor: RayExecutor | None = None
        self._key: bytes | None = None

    def executor_for(self, factory, num_envs: int) -> RayExecutor:
        import cloudpickle  # ships with ray

        key = cloudpickle.dumps(factory)
        if self._executor is None or key != self._key:
            self.shutdown()
            self._executor = RayExecutor(factory, max(num_envs, self.rc.num_workers), self.rc, keep_alive=True)
            self._key = key
        self._executor.resize(num_envs)
        return self._executor

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None


def make_ray_executor(factory, num_envs: int, num_workers: int | None = None, options: dict | RayConfig | None = None):
    """What `make_executor("ray", ...)` returns: a fresh executor (killed when the rollout ends)
    built from `options` / `num_workers`. A RayEnvPool passed as the executor leases instead."""
    if isinstance(options, RayConfig):
        return RayExecutor(factory, num_envs, options)
    fields = dict(options or {})
    unknown = set(fields) - set(RayConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown ray executor option(s) {sorted(unknown)}; known: "
                          f"{', '.join(RayConfig.__dataclass_fields__)}")
    if num_workers is not None:
        fields.setdefault("num_workers", num_workers)
    return RayExecutor(factory, num_envs, RayConfig(**fields))
