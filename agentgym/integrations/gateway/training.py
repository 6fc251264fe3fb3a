"""Training from the user's own agent program: its episodes, played through the gateway, are the
trainer's batches (`agentgym gateway --train PRESET`).

The trainer's loop is `agentgym.trainers.training.run_iteration`, unchanged: only its batch
producer differs. `GatewayBatches.get(k)` waits until the program has reported the reward of
`episodes_per_iter` more episodes (POST /episodes/<id>/reward), turns them into Trajectories
(one step per call, with its exact ids and logprobs; `Recorder.trajectory`) and hands them to the
estimator (GRPO, RLOO, ...: episodes opened with the same `group` are compared; GiGPO when the
program reports each call's state). During the update calls either wait (the default: the
recorder's lock is held from `get` to `finish`) or, with serve_during_update, are answered by a
rollout copy of the previous weights (HFPolicy.rollout_copy), each step's policy_version and the
batch's staleness recorded (the async trainer's `staleness_metrics`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from agentgym import progress
from agentgym.errors import ConfigError
from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway
from agentgym.integrations.gateway.recorder import Recorder
from agentgym.trainers.batches import RolloutBatch, staleness_metrics


class ReportedEpisodes:
    """The task source of run_iteration's producer: tasks come from the user's program, so there is
    nothing to pick; it only counts what it was shown."""

    def __init__(self):
        self.episodes = 0

    def next_tasks(self, n: int) -> list:
        raise ConfigError("the gateway's episodes come from the user's program, not from a task source")

    def update(self, trajectories, advantages) -> dict:
        self.episodes += len(trajectories)
        return {}

    def metrics(self) -> dict:
        return {"episodes_trained": self.episodes}

    def state_dict(self) -> dict:
        return {"episodes": self.episodes}


class TrajectoryBatches:
    """run_iteration's batch producer over trajectories someone else played: `trajectories_for(k)`
    gives iteration k's (the rng of iteration k is the trainer's, seeded by (seed, k))."""

    def __init__(self, trajectories_for: Callable[[int], list], seed: int, engine=None, dp=None,
                 session=progress.CURRENT):
        if dp is None:
            from agentgym.trainers.distributed import DataParallel

            dp = DataParallel()
        self.trajectories_for, self.seed, self.dp = trajectories_for, seed, dp
        self.session = progress.resolve(session)
        self.source = ReportedEpisodes()
        self.rollout_policy = engine

    def get(self, iteration: int) -> RolloutBatch:
        t0 = time.perf_counter()
        trajectories = self.trajectories_for(iteration)
        batch = RolloutBatch(iteration, np.random.default_rng([self.seed, iteration]), trajectories)
        batch.trainer_wait_s = time.perf_counter() - t0
        return batch

    def pause_engine(self) -> None:
        pass

    def prepare_update(self, policy, samples: list) -> list:
        return samples

    def finish(self, iteration: int, policy, batch: RolloutBatch, samples) -> dict:
        return {**staleness_metrics(batch.trajectories, samples, iteration), "trainer_wait_s": batch.trainer_wait_s}


class GatewayBatches(TrajectoryBatches):
    """The batches of a gateway's recorder: `episodes_per_iter` episodes each, in the order their
    rewards came. copy: the rollout copy the gateway samples with (serve_during_update), or None
    (the trainer's own policy: calls wait while it is updated)."""

    def __init__(self, recorder: Recorder, episodes_per_iter: int, seed: int, copy=None, timeout_s: float | None = None,
                 dp=None, session=progress.CURRENT):
        super().__init__(self._wait_for_episodes, seed, recorder.engine, dp, session)
        if episodes_per_iter < 1:
            raise ConfigError(f"--episodes-per-iter must be >= 1, got {episodes_per_iter}")
        self.recorder, self.n, self.copy, self.timeout_s = recorder, episodes_per_iter, copy, timeout_s
        self.taken = 0
        self.holding = False

    def _wait_for_episodes(self, iteration: int) -> list:
        r = self.recorder
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        with r.changed:
            while len(r.closed_order) - self.taken < self.n:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"iteration {iteration}: {len(r.closed_order) - self.taken} of {self.n} episodes "
                                       f"reported within {self.timeout_s:.0f} s")
                r.changed.wait(0.5)
            ids = r.closed_order[self.taken:self.taken + self.n]
            self.taken += self.n
        if self.copy is None:
            r.lock.acquire()  # no call samples while the weights change: they wait
            self.holding = True
        return [r.trajectory(r.episodes[i]) for i in ids]

    def finish(self, iteration: int, policy, batch: RolloutBatch, samples) -> dict:
        self.recorder.version = iteration + 1
        if self.copy is not None:
            self.copy.publish(iteration + 1)  # taken by the gateway's next sync()
        self.release()
        out = super().finish(iteration, policy, batch, samples)
        out["splits"] = sum(t.metadata.get("splits", 0) for t in batch.trajectories)
        return out

    def release(self) -> None:
        if self.holding:
            self.holding = False
            self.recorder.lock.release()


def train_through_gateway(cfg, gateway_cfg: GatewayConfig, episodes_per_iter: int, model_name: str = "agentgym",
                          serve_during_update: bool = False, log: Callable[[str], None] = print,
                          on_ready: Callable[[str], None] | None = None, session=progress.CURRENT) -> dict:
    """Serve the policy of training config `cfg` and train it on the episodes the user's program
    reports: cfg.iterations updates of episodes_per_iter episodes each; the final weights in
    <run_dir>/final_model. on_ready(url) once the gateway serves."""
    import torch

    from agentgym.policies.engines import EngineSettings
    from agentgym.trainers.distributed import DataParallel
    from agentgym.trainers.logging_utils import MetricsLogger
    from agentgym.trainers.run_setup import (build_heads, make_engine, make_optimizer, make_policy,
                                             prepare_start_model, previous_run, quiet_transformers,
                                             refuse_to_replace, run_dir_for)
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import run_iteration

    session = progress.resolve(session)
    if cfg.ppo.decoupled:
        raise ConfigError("ppo.decoupled is not supported through the gateway yet: set ppo.decoupled=false")
    quiet_transformers()
    set_torch_threads(cfg.torch_threads, log)  # a number, or auto (the household-tiny preset's)
    torch.manual_seed(cfg.seed)
    run_dir = run_dir_for(cfg)
    refuse_to_replace(run_dir, previous_run(run_dir),  # e.g. `agentgym train household-tiny`'s run: never deleted
                      "give the override run_dir=DIR to train in another folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    start_model, _ = prepare_start_model(cfg, run_dir, log, session=session)
    policy = make_policy(cfg.policy, start_model)
    heads = build_heads(cfg.estimator, policy)
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    copy = policy.rollout_copy(0) if serve_during_update else None
    engines = EngineSettings(cfg.policy, cfg.seed, cfg.ray)
    engine = copy if copy is not None else make_engine(engines, policy, start_model)
    context = getattr(getattr(policy.model, "config", None), "max_position_embeddings", None)
    recorder = Recorder(engine, model_names=(model_name,), context_len=context,
                        default_max_tokens=cfg.rollout.max_new_tokens)
    dp = DataParallel()
    batches = GatewayBatches(recorder, episodes_per_iter, cfg.seed, copy=copy, dp=dp, session=session)
    logger = MetricsLogger(run_dir, tensorboard=False, wandb=False, config=cfg.to_dict())
    started = time.perf_counter()
    try:
        with RunningGateway(recorder, gateway_cfg) as gateway:
            log(f"gateway serving {model_name!r} at {gateway.url}/v1 (episodes: POST {gateway.url}/episodes); "
                f"training {cfg.iterations} iterations of {episodes_per_iter} episodes")
            if on_ready is not None:
                on_ready(gateway.url)
            for iteration in range(cfg.iterations):
                try:
                    metrics = run_iteration(cfg, iteration, policy, optimizer, scheduler, batches, heads, dp)
                finally:
                    batches.release()
                metrics["gateway"] = dict(recorder.stats)
                logger.log(metrics, step=iteration + 1)
                log(f"iteration {iteration + 1}/{cfg.iterations}: success {metrics['rollout']['success_rate']:.3f}, "
                    f"reward {metrics['rollout']['mean_score']:.3f}, {metrics['time']['iteration_s']:.1f} s")
            policy.save(Path(run_dir) / "final_model")
    finally:
        logger.close()
        if engine is not policy:
            engine.close()  # a vLLM engine
    return {"run_dir": str(run_dir), "iterations": cfg.iterations, "seconds": time.perf_counter() - started,
            "gateway": dict(recorder.stats)}
