"""Training from the user's own agent program: its episodes, played through the gateway, are the
trainer's batches (`agentgym gateway --train PRESET`).

The trainer's loop is `agentgym.trainers.training.run_iteration`, unchanged: only its batch
producer differs. `GatewayBatches.get(k)` waits until the program has reported the reward of
`episodes_per_iter` more episodes (POST /episodes/<id>/reward) in whole groups, turns them into
Trajectories (one step per call, with its exact ids and logprobs; `Recorder.trajectory`) and hands
them to the estimator (GRPO, RLOO, ...: episodes opened with the same `group` are compared; GiGPO
when the program reports each call's state). Grouping is the trainer's job: a group some of whose
episodes still play is held for a later batch, and a lone episode an estimator cannot compare is
dropped and counted, so no client's timing can end the run. During the update calls either wait (the default: the
recorder's lock is held from `get` to `finish`) or, with serve_during_update, are answered by a
rollout copy of the previous weights (HFPolicy.rollout_copy), each step's policy_version and the
batch's staleness recorded (the async trainer's `staleness_metrics`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from agentgym import progress
from agentgym.errors import ConfigError
from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway
from agentgym.integrations.gateway.recorder import Recorder
from agentgym.trainers.batches import RolloutBatch, staleness_metrics

if TYPE_CHECKING:
    from agentgym.trainers.config import EnvConfig, RolloutConfig


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
    """The batches of a gateway's recorder: at least `episodes_per_iter` episodes each, whole groups
    in the order their rewards came (`_whole_groups`). copy: the rollout copy the gateway samples
    with (serve_during_update), or None (the trainer's own policy: calls wait while it is updated).
    min_group: the fewest episodes a group may have (2 for an estimator that compares within
    groups); idle_s: how long an open episode not answered still holds its group; max_hold_s: how
    long a reported episode waits for the rest of its group at most."""

    def __init__(self, recorder: Recorder, episodes_per_iter: int, seed: int, copy=None, timeout_s: float | None = None,
                 dp=None, session=progress.CURRENT, min_group: int = 1, idle_s: float = 5.0, max_hold_s: float = 60.0):
        super().__init__(self._wait_for_episodes, seed, recorder.engine, dp, session)
        if episodes_per_iter < 1:
            raise ConfigError(f"--episodes-per-iter must be >= 1, got {episodes_per_iter}")
        self.recorder, self.n, self.copy, self.timeout_s = recorder, episodes_per_iter, copy, timeout_s
        self.min_group, self.idle_s, self.max_hold_s = min_group, idle_s, max_hold_s
        self.seen = 0  # recorder.closed_order[:seen] are queued, taken or dropped
        self.queue: list[str] = []  # closed episodes not yet trained on, in the order their rewards came
        self.holding = False

    def _whole_groups(self) -> list[str] | None:
        """(Called holding recorder.changed.) The ids of the next batch, or None while too few are
        ready. A group is ready once none of its episodes still plays (is open and was answered
        within idle_s: one idle longer was abandoned), or once its first reported episode has
        waited max_hold_s (a program that names one group for episodes it keeps opening would
        hold it forever); ready groups are taken whole, oldest first, until there are n
        episodes. A ready group smaller than min_group is held for idle_s after its last episode
        (a program that plays a group's episodes one after another opens the next soon), then
        dropped and counted (recorder.stats["dropped_lone_episodes"])."""
        r, now = self.recorder, time.monotonic()
        self.queue += r.closed_order[self.seen:]
        self.seen = len(r.closed_order)
        playing = {e.group for e in r.open_episodes() if now - e.active_at < self.idle_s}
        groups: dict[str, list[str]] = {}
        for eid in self.queue:
            groups.setdefault(r.episodes[eid].group, []).append(eid)
        batch, dropped = [], set()
        for name, ids in groups.items():
            if name in playing and now - r.episodes[ids[0]].active_at < self.max_hold_s:
                continue
            if len(ids) < self.min_group:
                if now - max(r.episodes[i].active_at for i in ids) >= self.idle_s:
                    dropped.update(ids)
                continue
            batch += ids
            if len(batch) >= self.n:
                break
        if dropped:
            r.stats["dropped_lone_episodes"] += len(dropped)
            self.queue = [i for i in self.queue if i not in dropped]
        if len(batch) < self.n:
            return None
        taken = set(batch)
        self.queue = [i for i in self.queue if i not in taken]
        return batch

    def _wait_for_episodes(self, iteration: int) -> list:
        r = self.recorder
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        with r.changed:
            while (ids := self._whole_groups()) is None:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"iteration {iteration}: {len(self.queue)} of {self.n} episodes reported in "
                                       f"whole groups within {self.timeout_s:.0f} s")
                r.changed.wait(0.5)
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
        out["held_episodes"] = len(self.queue)  # reported, waiting for the rest of their group
        return out

    def release(self) -> None:
        if self.holding:
            self.holding = False
            self.recorder.lock.release()


def gateway_run_dir(run_dir: str | None, name: str) -> Path:
    """run_dir, or runs/<name>-gateway: never the folder `agentgym train <name>` writes by default."""
    return Path(run_dir) if run_dir else Path("runs") / f"{name}-gateway"


def chat_layout(env_cfg: EnvConfig, rollout_cfg: RolloutConfig, model_name: str) -> dict:
    """What the policy is trained to read and write (GET /layout): the env and its ChatEnv
    options, the reply budget and temperature of the preset's rollouts, the training tasks' filter.
    A program that builds its prompts with these (examples/gateway_agent.py) gives the policy the
    prompts it was warm-started on."""
    from agentgym.chat import ChatConfig

    chat = ChatConfig.of(env_cfg.chat).kwargs()
    return {"model": model_name, "env_id": env_cfg.id, "env_kwargs": dict(env_cfg.env_kwargs),
            "chat": {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in chat.items()},
            "max_tokens": rollout_cfg.max_new_tokens, "temperature": rollout_cfg.temperature,
            "group_size": rollout_cfg.group_size,
            "split": env_cfg.split, "categories": list(env_cfg.categories), "task_filter": dict(env_cfg.task_filter)}


def train_through_gateway(cfg, gateway_cfg: GatewayConfig, episodes_per_iter: int, model_name: str = "agentgym",
                          serve_during_update: bool = False, log: Callable[[str], None] = print,
                          on_ready: Callable[[str], None] | None = None, session=progress.CURRENT) -> dict:
    """Serve the policy of training config `cfg` and train it on the episodes the user's program
    reports: cfg.iterations updates of at least episodes_per_iter episodes each. The run ends as
    `agentgym train`'s does: in <run_dir> (default runs/<name>-gateway) config.yaml, the held-out
    tasks (eval_<split>.jsonl), metrics.jsonl with the held-out evaluation before and after,
    summary.json and final_model, so `agentgym eval <run_dir>` reproduces its figure. Episodes
    that name a held-out task are refused. on_ready(url) once the gateway serves. Returns the summary."""
    import torch

    from agentgym.policies.engines import EngineSettings
    from agentgym.registration import check_env_id, get_task_space, import_modules
    from agentgym.rewards.hook import env_reward_kwargs
    from agentgym.tasks.validation import heldout_keys
    from agentgym.trainers.config import save_config
    from agentgym.trainers.distributed import DataParallel
    from agentgym.trainers.estimators import estimator_spec
    from agentgym.trainers.logging_utils import MetricsLogger
    from agentgym.trainers.run_setup import (build_heads, make_engine, make_optimizer, make_policy,
                                             prepare_start_model, previous_run, quiet_transformers,
                                             refuse_to_replace)
    from agentgym.trainers.task_selection import write_eval_tasks
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import _evaluate_now, _summarize, heldout_result, run_iteration

    session = progress.resolve(session)
    if cfg.ppo.decoupled:
        raise ConfigError("ppo.decoupled is not supported through the gateway yet: set ppo.decoupled=false")
    quiet_transformers()
    cfg.torch_threads = set_torch_threads(cfg.torch_threads, log)  # a number, or auto (the household-tiny preset's)
    import_modules(cfg.imports)
    cfg.env.id = check_env_id(cfg.env.id)
    cfg.env.env_kwargs = {**cfg.env.env_kwargs, **env_reward_kwargs(cfg.env.reward)}  # as `agentgym train` evaluates
    torch.manual_seed(cfg.seed)
    run_dir = gateway_run_dir(cfg.run_dir, cfg.name)
    refuse_to_replace(run_dir, previous_run(run_dir),  # e.g. an earlier gateway run: never deleted
                      "give the override run_dir=DIR to train in another folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg.run_dir = str(run_dir)
    save_config(cfg, run_dir / "config.yaml")
    space = get_task_space(cfg.env.id)
    eval_path = write_eval_tasks(cfg.eval, cfg.env, space, run_dir)
    start_model, setup_info = prepare_start_model(cfg, run_dir, log, session=session)
    policy = make_policy(cfg.policy, start_model)
    heads = build_heads(cfg.estimator, policy)
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    copy = policy.rollout_copy(0) if serve_during_update else None
    engines = EngineSettings(cfg.policy, cfg.seed, cfg.ray)
    engine = make_engine(engines, policy, start_model)  # what the held-out evaluations play with
    served = copy if copy is not None else engine
    context = getattr(getattr(policy.model, "config", None), "max_position_embeddings", None)
    recorder = Recorder(served, model_names=(model_name,), context_len=context,
                        default_max_tokens=cfg.rollout.max_new_tokens, heldout_tasks=frozenset(heldout_keys(space)),
                        layout=chat_layout(cfg.env, cfg.rollout, model_name))
    dp = DataParallel()
    min_group = 2 if estimator_spec(cfg.estimator.name).group_relative else 1
    batches = GatewayBatches(recorder, episodes_per_iter, cfg.seed, copy=copy, dp=dp, session=session,
                             min_group=min_group, idle_s=gateway_cfg.idle_s)
    logger = MetricsLogger(run_dir, tensorboard=False, wandb=False, config=cfg.to_dict())
    state = {"iteration": 0, "evals": [], "setup": setup_info}
    started = time.perf_counter()

    def evaluate():  # held-out success, played and decoded as `agentgym train` evaluates
        if callable(reseed := getattr(engine, "reseed", None)):
            # sampled as by a fresh process (`agentgym eval RUN_DIR`): the clients' calls leave the
            # sampler mid-stream, and a request with the seed it last set does not reseed it
            reseed(cfg.seed)
        return heldout_result(cfg.eval, cfg.env, engine, eval_path, cfg.seed, cfg.rollout, session)

    try:
        if cfg.eval.before:
            ev = _evaluate_now(evaluate, cfg.log, run_dir, policy, state, dp)
            logger.log({"eval": ev}, step=0)
            log(f"held-out success before RL: {ev['success_rate']:.3f}")
        with RunningGateway(recorder, gateway_cfg) as gateway:
            log(f"gateway serving {model_name!r} at {gateway.url}/v1 (episodes: POST {gateway.url}/episodes; the chat "
                f"layout it trains: GET {gateway.url}/layout); training {cfg.iterations} iterations of "
                f"{episodes_per_iter} episodes")
            if on_ready is not None:
                on_ready(gateway.url)
            for iteration in range(cfg.iterations):
                try:
                    metrics = run_iteration(cfg, iteration, policy, optimizer, scheduler, batches, heads, dp)
                finally:
                    batches.release()
                state["iteration"] = iteration + 1
                state["rl_seconds"] = state.get("rl_seconds", 0.0) + metrics["time"]["iteration_s"]
                metrics["gateway"] = dict(recorder.stats)
                logger.log(metrics, step=iteration + 1)
                log(f"iteration {iteration + 1}/{cfg.iterations}: success {metrics['rollout']['success_rate']:.3f}, "
                    f"reward {metrics['rollout']['mean_score']:.3f}, {metrics['time']['iteration_s']:.1f} s")
        ev = _evaluate_now(evaluate, cfg.log, run_dir, policy, state, dp)
        logger.log({"eval": ev}, step=state["iteration"])
        log(f"held-out success after RL: {ev['success_rate']:.3f}")
        policy.save(Path(run_dir) / "final_model")
    finally:
        logger.close()
        if engine is not policy:
            engine.close()  # a vLLM engine
    summary = _summarize(cfg.eval, cfg.log, cfg.iterations, cfg.seed, run_dir, state, started, log)
    return {**summary, "seconds": time.perf_counter() - started, "gateway": dict(recorder.stats)}
