"""The batch producer: every iteration's rollout batch comes from `BatchProducer.get(k)`.

Without asynchrony (rollout.max_staleness = 0) the batch is played right when the loop asks for
it, on the trainer's rollout engine, with this rank's share of the groups under data parallel.
With it, the same `_produce` runs ahead in a thread; there is no second copy of the batch code.

Asynchronous rollouts under a staleness bound, and long-tail control of the rollout batch:

    rollout.max_staleness = K      the batch trained at iteration k comes from weights of version
                                   >= k - K (version = RL updates applied; the trainer holds
                                   version k while it trains iteration k)

With K > 0 a producer thread plays the next batches on its own copy of the policy
(`HFPolicy.rollout_copy()`) while the trainer updates: after each update the trainer publishes a
snapshot of its trainable weights to the copy (version k + 1, `copy.publish`) and the producer
loads the newest one, through the copy's `sync()` as every engine follows the trainer, before a batch (and, with
rollout.partial_rollouts, before every turn, so an episode may span an update; its later steps
are flagged `partial`). Before starting batch j the producer waits until version j - K exists:
that is the whole bound, checked again on every step when the trainer takes the batch. Generation
and env stepping spend their time in torch kernels and env I/O that release the GIL, so a
thread is enough to overlap them with the update; the copy means the update never races the
sampler. K = 0 makes each batch inline, on the trainer's own weights.

Every step records its policy version (Step.policy_version). The update corrects stale samples
against the behaviour logprobs recorded at generation (truncated importance weights, ppo.is_cap,
2.0 by default) or, with ppo.decoupled, with the decoupled PPO objective whose proximal policy is
the weights at update start (trainers/ppo.py).

Long-tail control, with or without asynchrony: rollout.episode_time_limit_s cuts episodes still
running after that many seconds (truncated, a failure to the estimators); rollout.oversample_groups
plays that many extra groups and trains on the first tasks_per_iter to finish; the others are
counted (async/dropped_groups, async/dropped_groups_total) and left out, never silently. This
favours the quick groups: the batch leans towards short episodes.

Seeds: batch j draws its task list, sampling seed and reset seed exactly as the synchronous loop
does (generator seeded by (seed, j)) and hands that generator on to the update, so the thread
with K = 0 reproduces the inline run bit for bit (tested). With K > 0 the task source is
asked for batch j + 1 before it has seen batch j's results, and a resumed run regenerates the
batches that were queued at the checkpoint from the resumed weights: it continues correctly, not
bit for bit.

Estimators with a learned head on the policy's hidden states (ppo's value head, spa's progress
head) are refused with K > 0: their features and targets assume the batch came from the weights
being trained (GAE without V-trace corrections); use grpo, rloo, loop or gigpo.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from agentgym.continuation import supports_tokens
from agentgym.policies.base import SamplingParams
from agentgym import progress
from agentgym.rollout import RolloutRequest, play
from agentgym.trainers.estimators.tree import branch_config
from agentgym.turn_monitors import TurnsBar, long_tail_rules
from agentgym.trainers.checks import importance_cap, rollouts_ahead
from agentgym.trainers.learner import score_sequences
from agentgym.trainers.distributed import DataParallel


# --- the batches ---------------------------------------------------------------------------------
@dataclass
class RolloutBatch:
    iteration: int
    rng: np.random.Generator  # continues into the update (minibatch order), as in the synchronous loop
    trajectories: list
    dropped: list = field(default_factory=list)  # trajectories of over-sampled groups left out
    produce_s: float = 0.0  # wall time from the bound being met to the batch being ready
    wait_on_trainer_s: float = 0.0  # the producer waiting for version iteration - K
    trainer_wait_s: float = 0.0  # the trainer waiting for this batch


class _Stopped(Exception):
    pass


class _LockedSource:
    """The task source shared by producer (next_tasks) and trainer (update, metrics, state_dict).

    Only what those callers use is exposed, each call under the lock: the producer thread may be
    drawing batch j + 1 while the trainer records batch j, and both mutate the pool and the rng."""

    def __init__(self, source, lock):
        self._source, self._lock = source, lock

    def next_tasks(self, n: int) -> list:
        with self._lock:
            return self._source.next_tasks(n)

    def update(self, trajectories, advantages) -> dict:
        with self._lock:
            return self._source.update(trajectories, advantages)

    def metrics(self) -> dict:
        with self._lock:
            return self._source.metrics()

    def state_dict(self) -> dict:
        # under the lock so a checkpoint never mixes a pool and an rng from different draws
        with self._lock:
            return self._source.state_dict()


class _VersionedPolicy:
    """The producer's policy as play() sees it: stamps each completion with the version of the
    weights that produced it, loads newer weights between turns when partial rollouts are on,
    and stops a batch in progress when training ends. Token-level when its policy is (growing
    conversations are then continued token in / token out, agentgym.continuation)."""

    def __init__(self, engine: "BatchProducer"):
        self.engine = engine
        policy = engine.rollout_policy
        if supports_tokens(policy):
            self.tokenizer, self.eos_ids, self.encode_prompt = policy.tokenizer, policy.eos_ids, policy.encode_prompt
            if callable(getattr(policy, "encode_response", None)):
                self.encode_response = policy.encode_response  # admissible-only decoding encodes the replies
            self.generate_ids = self._generate_ids
            self._caches = "cache_keys" in inspect.signature(policy.generate_ids).parameters  # KV reuse (HF)
            if callable(getattr(policy, "forget", None)):
                self.forget = policy.forget

    def _before(self) -> None:
        engine = self.engine
        if engine._stop:
            raise _Stopped()
        if engine.partial:
            engine._refresh_weights()

    def _stamped(self, out: list) -> list:
        for c in out:
            c.policy_version = self.engine.loaded_version
        return out

    def generate(self, prompts, sampling=None, contexts=None):
        self._before()
        return self._stamped(self.engine.rollout_policy.generate(prompts, sampling, contexts))

    def _generate_ids(self, prompt_ids, sampling=None, cache_keys=None, allowed_replies=None):
        self._before()
        policy = self.engine.rollout_policy
        options = {} if allowed_replies is None else {"allowed_replies": allowed_replies}  # the checks allow it for hf
        if cache_keys is not None and self._caches:
            return self._stamped(policy.generate_ids(prompt_ids, sampling, cache_keys=cache_keys, **options))
        return self._stamped(policy.generate_ids(prompt_ids, sampling, **options))


def make_rollout_copy(policy):
    """Old name (kept for trainers/async_rollout.py's one release): `policy.rollout_copy()`."""
    return policy.rollout_copy()


class BatchProducer:
    """Produces the batch of every iteration from start_iteration to cfg.iterations - 1.

    policy: the trainer's TrainablePolicy; engine: what generates (policy.engine's RolloutEngine,
    the policy itself for "hf"). background=None: a producer thread when max_staleness > 0,
    batches made inline by get() otherwise. background=True with K = 0 runs the thread and the
    weight copy anyway: the test that the machinery reproduces the inline batches uses it.
    dp: the data-parallel context (inline only: this rank's groups); executor: a name or the
    run's RayEnvPool; session: the progress session the rollouts' bars draw in (agentgym.progress;
    by default the calling command's), handed to the producer thread too."""

    def __init__(self, cfg, policy, source, start_iteration: int = 0, background: bool | None = None,
                 engine=None, dp=None, executor=None, session=progress.CURRENT):
        self.session = progress.resolve(session)
        if dp is None:
            dp = DataParallel()
        self.dp = dp
        self.executor = cfg.env.executor if executor is None else executor
        self.cfg = cfg
        self.K = int(cfg.rollout.max_staleness)
        self.partial = bool(cfg.rollout.partial_rollouts)
        self.background = self.K > 0 if background is None else bool(background)
        self.start, self.end = int(start_iteration), int(cfg.iterations)
        self._cond = threading.Condition()
        self.source = _LockedSource(source, threading.RLock())
        self.version = self.start  # newest version published by the trainer
        self._ready: dict[int, RolloutBatch] = {}
        self._error: BaseException | None = None
        self._stop = False
        self.dropped_groups_total = 0
        self.trainer_policy = policy
        # in a thread: a copy that follows the trainer through sync() (HFPolicy.rollout_copy); the
        # test of partial rollouts wraps rollout_policy, so the follower is kept apart from it
        self._copy = policy.rollout_copy(self.start) if self.background else None
        self.rollout_policy = self._copy if self.background else (engine or policy)
        self.loaded_version = self.start
        self._versioned = _VersionedPolicy(self)
        self._thread = None
        if self.background:
            self._thread = threading.Thread(target=self._run, name="agentgym-rollouts", daemon=True)
            self._thread.start()

    # --- producer side ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            for j in range(self.start, self.end):
                batch = self._produce(j)
                with self._cond:
                    self._ready[j] = batch
                    self._cond.notify_all()
        except _Stopped:
            pass
        except BaseException as exc:  # surfaced to the trainer by get()
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _refresh_weights(self) -> None:
        if not self.background:
            self.loaded_version = self.version  # inline: the trainer's own weights
            return
        self._copy.sync()  # the newest weights the trainer published, if not loaded yet
        self.loaded_version = self._copy.synced_version

    def _produce(self, j: int) -> RolloutBatch:
        cfg, r, dp = self.cfg, self.cfg.rollout, self.dp
        t0 = time.perf_counter()
        with self._cond:
            while self.version < j - self.K and not self._stop:
                self._cond.wait(0.5)
            if self._stop:
                raise _Stopped()
        t1 = time.perf_counter()
        self._refresh_weights()
        rng = np.random.default_rng([cfg.seed, j])
        tasks = self.source.next_tasks(r.tasks_per_iter + r.oversample_groups)  # split or evolving pool, by curriculum
        tasks, first_group = dp.shard(tasks)  # data parallel: this rank's block of whole groups
        sampling = dp.sampling(SamplingParams(temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
                                              seed=int(rng.integers(2**31)), admissible_only=r.admissible_only))
        request = RolloutRequest(cfg.env.id, tasks, r.group_size, seed=int(rng.integers(2**31)) + first_group,
                                 sampling=sampling, executor=self.executor, env_kwargs=cfg.env.env_kwargs,
                                 chat=cfg.env.chat, max_turns=cfg.env.max_turns,
                                 on_template_mismatch=r.on_template_mismatch, branch=branch_config(cfg.estimator))
        # the long tail (time limit, over-sampling) and the bar wrap the rollout (agentgym.turn_monitors)
        rules = long_tail_rules(r.episode_time_limit_s, r.tasks_per_iter if r.oversample_groups else None)
        with dp.full_weights(self.trainer_policy), \
                progress.bar(f"collect {len(tasks)} tasks x {r.group_size}", unit="turns", every=15.0,
                             session=self.session) as bar:  # FSDP: the weights gathered once for the whole rollout
            trajectories = play(request, self._versioned, monitors=[*rules, TurnsBar(bar)] if bar.active else rules)
        mark_partial(trajectories)
        kept = [t for t in trajectories if not t.metadata.get("dropped")]
        dropped = [t for t in trajectories if t.metadata.get("dropped")]
        return RolloutBatch(j, rng, kept, dropped, produce_s=time.perf_counter() - t1, wait_on_trainer_s=t1 - t0)

    # --- trainer side -------------------------------------------------------------------------
    def get(self, iteration: int) -> RolloutBatch:
        """The batch of `iteration`, waiting for it if needed; checks the staleness bound."""
        t0 = time.perf_counter()
        if not self.background:
            batch = self._produce(iteration)
        else:
            with self._cond:
                while iteration not in self._ready and self._error is None:
                    if self._thread is not None and not self._thread.is_alive():
                        raise RuntimeError("the rollout producer stopped without a batch for iteration "
                                           f"{iteration}")
                    self._cond.wait(0.5)
                if self._error is not None:
                    raise self._error
                batch = self._ready.pop(iteration)
        batch.trainer_wait_s = time.perf_counter() - t0
        check_staleness(batch.trajectories + batch.dropped, iteration, self.K)
        return batch

    def pause_engine(self) -> None:
        """Between rollout and update: the engine frees accelerator memory (vLLM on CUDA; a no-op
        otherwise). It wakes on its next generate."""
        if not self.background:
            self.rollout_policy.sleep()

    def prepare_update(self, policy, samples: list) -> list:
        """Decoupled PPO: the samples with their proximal logprobs (the weights at update start)."""
        if not self.cfg.ppo.decoupled or not samples:
            return samples
        scored = score_sequences(policy, samples, self.cfg.ppo.micro_batch_size, False)
        return [dataclasses.replace(s, prox_logprobs=[0.0] + logp.tolist()) for s, (logp, _) in zip(samples, scored)]

    def finish(self, iteration: int, policy, batch: RolloutBatch, samples) -> dict:
        """After the update of `iteration`: publish version iteration + 1; the iteration's metrics
        of asynchrony and long-tail control (empty when batches are made inline without them)."""
        if self.background:
            self._copy.publish(iteration + 1)  # before the version below: a producer woken by it finds the weights
        with self._cond:
            self.version = iteration + 1
            self._cond.notify_all()
        if not (self.background or rollouts_ahead(self.cfg.rollout, self.cfg.ppo)):
            return {}
        n_dropped = len({t.group_id for t in batch.dropped})
        self.dropped_groups_total += n_dropped
        return {**staleness_metrics(batch.trajectories, samples, iteration),
                "trainer_wait_s": batch.trainer_wait_s, "rollout_wait_s": batch.wait_on_trainer_s,
                "produce_s": batch.produce_s, "dropped_groups": n_dropped,
                "dropped_groups_total": self.dropped_groups_total,
                "time_limited_episodes": sum(bool(t.metadata.get("time_limit")) for t in batch.trajectories)}

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=120)


# --- bookkeeping (pure) --------------------------------------------------------------------------
def mark_partial(trajectories) -> None:
    """Flag the steps generated by a newer version than their episode's first step."""
    for t in trajectories:
        first = next((s.policy_version for s in t.steps if s.policy_version is not None), None)
        for s in t.steps:
            s.partial = first is not None and s.policy_version is not None and s.policy_version != first


def check_staleness(trajectories, iteration: int, max_staleness: int) -> None:
    for t in trajectories:
        for s in t.steps:
            if s.policy_version is not None and iteration - s.policy_version > max_staleness:
                raise RuntimeError(f"iteration {iteration}: a step of version {s.policy_version} exceeds "
                                   f"rollout.max_staleness={max_staleness} (a bug in the rollout producer)")


def staleness_metrics(trajectories, samples, iteration: int) -> dict:
    """Histogram of the staleness of the steps trained on (iteration - policy version)."""
    hist: Counter = Counter()
    for s in samples:
        for i, t in s.step_refs:
            v = trajectories[i].steps[t].policy_version
            if v is not None:
                hist[iteration - v] += 1
    n = sum(hist.values())
    episodes = [t for t in trajectories if t.steps]
    return {
        "staleness": {str(k): hist[k] for k in sorted(hist)},
        "staleness_mean": sum(k * c for k, c in hist.items()) / n if n else 0.0,
        "staleness_max": max(hist) if hist else 0,
        "partial_steps": sum(s.partial for t in episodes for s in t.steps),
        "partial_episodes": sum(any(s.partial for s in t.steps) for t in episodes),
    }


AsyncRollouts = BatchProducer  # old name (kept for one release)


def off_policy_kwargs(ppo_cfg, rollout_cfg) -> dict:
    """Old helper: the truncation cap as ppo_clip_loss's keyword (trainers.checks.importance_cap)."""
    cap = importance_cap(ppo_cfg, rollout_cfg)
    return {} if cap is None else {"is_cap": cap}
