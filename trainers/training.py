"""The training loop: collect -> advantages -> token-level PPO-clip update -> log -> eval -> checkpoint.

A handful of plain functions, in the order they run (CleanRL style):

    train(cfg)                      the whole pipeline of one run (tiny model, SFT, RL, eval)
      prepare_start_model           (run_setup.py) build the tiny model / SFT warm start when asked
      select_train_tasks            (task_selection.py) train split (filtered, held-out ids refused),
                                    a task file or fresh tasks
      make_policy / make_engine     the policy the trainer updates, and what generates with it
                                    (policy.engine: agentgym.policies.engines)
      load_teacher                  (distill.py) distill.teacher's frozen scorer, when set
      run_iteration                 one RL iteration:
        BatchProducer.get           (batches.py) tasks x group_size episodes, inline or made ahead
        tokenize_trajectories       (samples.py) the token sequences the policy generated
        score_heads                 (learner.py, heads.py) one no-grad pass: values, progress, logprobs
        correct                     (rollout_correction.py) trainer vs engine logprobs: the mismatch
                                    metrics and ppo.rollout_correction's weights
        compute_advantages          trainers.estimators
        make_samples                (samples.py) sequences + advantages -> what the update trains on
        distill_samples             (distill.py) the teacher's per-token reverse KL as the advantage
        ppo_update                  (learner.py) minibatches x epochs of the clipped loss
      evaluate_policy               held-out success (agentgym.evaluation)
      save_checkpoint               exact resume

Every random draw of iteration k comes from generators seeded by (seed, k) or restored from
the checkpoint, so "train N iterations" equals "train k, resume, train N-k" bit for bit.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

import agentgym  # noqa: F401  registers the built-in envs
from agentgym import progress
from agentgym.evaluation.evaluate import EvalRequest, run_eval
from agentgym.evaluation.stats import paired_gain, power_warning
from agentgym.policies.base import SamplingParams
from agentgym.registration import check_env_id, get_task_space, import_modules
from agentgym.rewards.hook import env_reward_kwargs, reward_hook
from agentgym.tasks.source import make_task_source_from_config
from agentgym.tasks.protocol import idle_commands
from agentgym.tasks.splits import load_split
from agentgym.trainers import distributed
from agentgym.trainers.batches import BatchProducer
from agentgym.trainers.checkpoint import check_resume, load_checkpoint, save_checkpoint
from agentgym.trainers.precision import bf16_rollout, update_autocast
from agentgym.trainers.checks import importance_cap
from agentgym.policies.engines import EngineSettings
from agentgym.trainers.config import (EnvConfig, EvalConfig, LogConfig, PPOConfig, RolloutConfig, SFTConfig,
                                      TrainConfig, save_config)
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages, estimator_spec
from agentgym.trainers.diagnostics import iteration_credit
from agentgym.trainers.disk import disk_full_error, is_disk_full
from agentgym.trainers.env_requirements import check_env_features
from agentgym.trainers.heads import fit_spa_progress, per_step_arrays, step_values  # noqa: F401  (old path)
from agentgym.trainers.learner import (TrainingDiverged, check_finite, equal_minibatches,  # noqa: F401  (old paths)
                                       ppo_update, score_sequences)
from agentgym.trainers.logging_utils import MetricsLogger, plot_learning_curves
from agentgym.trainers.ppo import clip_range
from agentgym.trainers.records import save_evaluation, save_iteration
from agentgym.trainers.distill import check_teacher, distill_samples, load_teacher
from agentgym.trainers.rollout_correction import (correct, require_rollout_logprobs, rollout_logprobs_missing,
                                                  unmeasured_note)
from agentgym.trainers.run_setup import (build_heads, clear_previous_run, finished_line, finished_run, load_judge,
                                         make_engine, make_optimizer, make_policy, prepare_run_dir,
                                         prepare_start_model, previous_run, quiet_transformers, refuse_to_replace,
                                         run_dir_for)
from agentgym.trainers.task_selection import select_train_tasks, write_eval_tasks
from agentgym.trainers.threads import set_torch_threads
from agentgym.trainers.samples import TokenSequence, make_samples, tokenize_trajectories


# --- one iteration ------------------------------------------------------------------------------
def score_heads(ppo_cfg: PPOConfig, est_cfg: EstimatorConfig, policy, heads: dict, sequences: list[TokenSequence],
                trajectories, seed: int, dp) -> tuple:
    """What the estimator needs from the policy's hidden states, from one no-grad pass when any
    is asked for: per-step values (value head), progress (SPA's head), recomputed logprobs."""
    value_head, progress_head = heads.get("value"), heads.get("progress")
    want_logprobs = ppo_cfg.recompute_old_logprobs or ppo_cfg.rollout_correction.active
    if value_head is None and progress_head is None and not want_logprobs:
        return None, None, None
    # the trainer's logprobs of a rollout correction are the update's: under its matmul precision (ppo.matmul_dtype)
    precision = update_autocast(ppo_cfg.matmul_dtype, policy.device) \
        if ppo_cfg.rollout_correction.active else contextlib.nullcontext()
    with dp.full_weights(policy), precision:
        scored = score_sequences(policy, sequences, ppo_cfg.micro_batch_size,
                                 want_hidden=value_head is not None or progress_head is not None)
    recomputed = [[0.0] + logp.tolist() for logp, _ in scored] if want_logprobs else None
    hidden = {id(s): h for s, (_, h) in zip(sequences, scored)}
    values = step_values(value_head, sequences, trajectories, hidden) if value_head is not None else None
    progress = None
    if progress_head is not None:
        progress = fit_spa_progress(progress_head, sequences, trajectories, hidden, est_cfg.outcome, seed)
    return values, progress, recomputed


def _rollout_stats(trajectories) -> dict:
    live = [t for t in trajectories if not t.infra_error]
    steps = sum(len(t.steps) for t in live)
    return {
        "success_rate": float(np.mean([t.success for t in live])) if live else 0.0,
        "mean_score": float(np.mean([t.score for t in live])) if live else 0.0,
        "mean_steps": steps / max(len(live), 1),
        "invalid_rate": sum(t.num_invalid for t in live) / max(steps, 1),
        "episodes": len(live),
        "infra_errors": len(trajectories) - len(live),
        "response_tokens": sum(len(s.response_ids or []) for t in live for s in t.steps),
        "retokenized_turns": sum(t.metadata.get("retokenized_turns", 0) for t in live),
        "free_turns": sum(t.metadata.get("free_turns", 0) for t in live),  # admissible_only, nothing admissible
    }


def update_clip(ppo_cfg: PPOConfig, estimator: str) -> tuple[float, float]:
    asymmetric = ppo_cfg.asymmetric_clip
    if asymmetric is None:  # the estimator's declared default (LOOP's asymmetric clip)
        asymmetric = estimator_spec(estimator).asymmetric_clip
    return clip_range(ppo_cfg.clip_eps, asymmetric)


def run_iteration(cfg: TrainConfig, iteration: int, policy, optimizer, scheduler, producer: BatchProducer,
                  heads: dict, dp=None, reward=None, teacher=None) -> dict:
    """reward: env.reward's hook (agentgym.rewards.hook), rewriting outcomes or step rewards in place;
    teacher: distill.teacher's scorer (trainers/distill.py), whose per-token KL becomes the advantage."""
    dp = producer.dp if dp is None else dp
    t0, c0 = time.perf_counter(), time.process_time()  # wall, and CPU (what a shared machine cannot inflate)
    frozen = getattr(policy, "frozen_states", None)  # the frozen layers' outputs, kept by the training rollouts
    if frozen is not None:
        frozen.clear()
        frozen.recording = True
    try:
        batch = producer.get(iteration)  # played now, or made ahead under the staleness bound (batches.py)
    finally:
        if frozen is not None:
            frozen.recording = False
    if frozen is not None and frozen.full:
        progress.log(f"iteration {iteration}: the frozen layers' outputs would exceed ppo.frozen_states_max_gib="
                     f"{cfg.ppo.frozen_states_max_gib:g}: minibatches with samples they were not kept for run the "
                     "frozen layers in the update (slower); raise it if memory allows", session=producer.session)
    rng, trajectories = batch.rng, batch.trajectories
    t_rollout, c_rollout = time.perf_counter() - t0, time.process_time() - c0
    reward_metrics = reward(trajectories) if reward is not None else None  # before any advantage is computed
    producer.pause_engine()  # vLLM on CUDA: give its GPU memory to the update (no-op on CPU)

    # tokens first; the heads read them; the advantages come next; samples are made from both, once
    correcting = cfg.ppo.rollout_correction
    require_rollout_logprobs(correcting, trajectories, cfg.policy.engine)  # a correction without them: refused
    missing = rollout_logprobs_missing(trajectories)  # no engine logprobs: no mismatch to measure
    sequences = tokenize_trajectories(trajectories, cfg.ppo.sample_mode)
    values, progress_scores, recomputed = score_heads(cfg.ppo, cfg.estimator, policy, heads, sequences, trajectories,
                                               cfg.seed + iteration, dp)
    # the trainer's logprobs against the engine's: the mismatch, and the correction's weights when on
    correction = correct(correcting, [s.loss_mask for s in sequences], recomputed,
                         [s.old_logprobs for s in sequences]) if recomputed is not None and not missing else None
    try:
        advantages = compute_advantages(trajectories, cfg.estimator, values=values, progress=progress_scores)
    except ValueError as exc:
        raise TrainingDiverged(f"iteration {iteration}: {exc}; training stopped, the last checkpoint is kept") from None
    for a in advantages:
        check_finite("advantages", a, iteration)
    all_trajectories, all_advantages = dp.gather(trajectories, advantages)  # every rank's, for the source and logs
    dp.on_main(save_iteration, cfg.log, run_dir_for(cfg), iteration, all_trajectories, all_advantages, cfg.estimator,
               policy, cfg.ppo.drop_abs_adv_below)
    producer.source.update(all_trajectories, all_advantages)
    returns = [a + v for a, v in zip(advantages, values)] if values is not None else None
    samples = make_samples(sequences, advantages, returns=returns,
                           drop_abs_adv_below=0.0 if teacher is not None else cfg.ppo.drop_abs_adv_below,
                           old_logprobs=recomputed if cfg.ppo.recompute_old_logprobs or correcting.active else None,
                           token_weights=correction.weights if correcting.active else None)
    distilled = None
    if teacher is not None:  # the teacher's per-token KL replaces (or joins) the env advantage
        samples, distilled = distill_samples(samples, teacher.score(samples, cfg.ppo.micro_batch_size),
                                             cfg.distill.reward_coef, cfg.ppo.drop_abs_adv_below)
    samples = producer.prepare_update(policy, dp.global_samples(samples))  # decoupled PPO: proximal logprobs
    t1, c1 = time.perf_counter(), time.process_time()
    clip = update_clip(cfg.ppo, cfg.estimator.name)
    update = ppo_update(cfg.ppo, clip, policy, optimizer, scheduler, samples, rng, iteration, heads.get("value"),
                        importance_cap(cfg.ppo, cfg.rollout), dp, estimator=cfg.estimator, session=producer.session,
                        # without a pass of the trainer's logprobs above, the update's first step measures the mismatch
                        mismatch=correcting if correcting.measure and recomputed is None and not missing else None,
                        ) if samples else {}
    measured = update.pop("mismatch", None)
    t_update, c_update = time.perf_counter() - t1, time.process_time() - c1
    if frozen is not None:
        frozen.clear()  # the update has read them; the evaluation's rollouts keep none
    all_adv = np.concatenate([a for a in all_advantages if len(a)] or [np.zeros(1)])
    train_tokens = sum(len(s) for s in samples) * cfg.ppo.epochs
    metrics = {
        "iteration": iteration + 1,
        "rollout": _rollout_stats(all_trajectories),
        "adv": {"mean": float(all_adv.mean()), "std": float(all_adv.std()), "abs_mean": float(np.abs(all_adv).mean()),
                "nonzero_frac": float(np.mean(np.abs(all_adv) > 1e-8))},
        "train": {**update, "samples": len(samples), "tokens": train_tokens},
        "tasks": producer.source.metrics(),
        "time": {"rollout_s": t_rollout, "update_s": t_update, "iteration_s": time.perf_counter() - t0,
                 "rollout_cpu_s": c_rollout, "update_cpu_s": c_update, "iteration_cpu_s": time.process_time() - c0},
    }
    if reward_metrics is not None:
        metrics["reward"] = reward_metrics
    if mismatch := correction.metrics if correction is not None else measured:
        metrics["mismatch"] = mismatch
    elif missing and correcting.measure:
        metrics["unmeasured"] = unmeasured_note(cfg.policy.engine)  # train() says it once, and drops it
    if distilled is not None:
        metrics["distill"] = distilled
    if callable(hit_rate := getattr(producer.rollout_policy, "prefix_cache_hit_rate", None)):
        metrics["rollout"]["prefix_cache_hit_rate"] = hit_rate()  # vLLM: prompt tokens its prefix cache served
    if async_metrics := producer.finish(iteration, policy, batch, samples):  # publishes the new weights
        metrics["async"] = async_metrics
    # idle / invalid steps' credit; idle as the env's task space declares it
    metrics["credit"] = iteration_credit(all_trajectories, all_advantages, cfg.estimator,
                                         idle_commands(get_task_space(cfg.env.id)))
    metrics["time"]["train_tokens_per_s"] = train_tokens / max(t_update, 1e-9)
    metrics["time"]["rollout_tokens_per_s"] = metrics["rollout"]["response_tokens"] / max(t_rollout, 1e-9)
    return metrics


# --- evaluation -----------------------------------------------------------------------------------
def heldout_result(eval_cfg: EvalConfig, env_cfg: EnvConfig, engine, eval_path: Path, seed: int,
                   rollout_cfg: RolloutConfig, session=progress.CURRENT):
    """The EvalResult of `engine` on the tasks in eval_path, played as the run's env and chat layout
    and decoded as its rollouts are (rollout.admissible_only); replies get eval.max_new_tokens
    tokens, or the rollouts' budget when that is unset."""
    sampling = SamplingParams(temperature=eval_cfg.temperature, seed=seed, admissible_only=rollout_cfg.admissible_only,
                              max_new_tokens=eval_cfg.max_new_tokens or rollout_cfg.max_new_tokens)
    request = EvalRequest(env_cfg.id, str(eval_path), eval_cfg.episodes_per_task, sampling=sampling,
                          chat=env_cfg.chat, env_kwargs=env_cfg.env_kwargs, seed=seed,
                          max_batch_episodes=eval_cfg.max_batch_episodes)
    return run_eval(request, engine, policy_name="HFPolicy", session=session)


def eval_summary(result) -> dict:
    out = result.summary()
    out["wall_s"] = result.wall_seconds
    # per-task success, so that two evaluations on the same tasks give a paired interval of the gain
    out["per_task_success"] = {t["task_id"]: t["successes"] / t["episodes"] for t in result.per_task if t["episodes"]}
    return out


def frozen_states_unused(pc: PPOConfig, engine: str, policy, producer: BatchProducer, heads: dict) -> str | None:
    """Why the update cannot start from the rollout's frozen-layer outputs (None: it can, or nothing is
    frozen or it is turned off). They need rollouts by this very policy
    (the HF engine, made inline), one process, and no value head (a value may read a sample's last
    position, whose state the rollout never computes)."""
    from agentgym.policies.frozen_states import lowest_adapted_layer

    if not pc.reuse_frozen_states or not hasattr(policy, "keep_frozen_states") \
            or lowest_adapted_layer(policy.model) == 0:
        return None
    reasons = [(producer.dp.enabled, "data parallel"),
               (bool(heads.get("value")), "a value head"),
               (producer.background, "asynchronous rollouts"),
               (producer.rollout_policy is not policy, f"policy.engine={engine}")]
    return next((why for bad, why in reasons if bad), None)


def frozen_states_for(pc: PPOConfig, engine: str, policy, producer: BatchProducer, heads: dict):
    """The store of the frozen layers' outputs the training rollouts keep for the update
    (policies/frozen_states.py), where it can be used (`frozen_states_unused`); else None."""
    if not pc.reuse_frozen_states or not hasattr(policy, "keep_frozen_states") \
            or frozen_states_unused(pc, engine, policy, producer, heads) is not None:
        return None
    return policy.keep_frozen_states(max_bytes=int(pc.frozen_states_max_gib * 2**30))


def evaluate_policy(eval_cfg: EvalConfig, env_cfg: EnvConfig, engine, eval_path: Path, seed: int, *,
                    rollout: RolloutConfig, session=progress.CURRENT) -> dict:
    """Held-out success of `engine` on the tasks in eval_path (heldout_result, summarized)."""
    return eval_summary(heldout_result(eval_cfg, env_cfg, engine, eval_path, seed, rollout, session))


def _evaluate_now(evaluate: Callable[[], object], log_cfg: LogConfig, run_dir: Path, policy, state: dict,
                  dp) -> dict | None:
    """Every rank enters (FSDP gathers the weights); rank 0 runs `evaluate` (heldout_result with the
    run's settings) and records it in `state` and for `agentgym view` (log.save_trajectories_every)."""
    def on_main() -> dict:
        result = evaluate()
        save_evaluation(log_cfg, run_dir, result, state["iteration"], policy)
        ev = eval_summary(result)
        state["evals"].append({"iteration": state["iteration"], **ev})
        return ev

    with dp.full_weights(policy):
        return dp.on_main(on_main)


# --- the run ----------------------------------------------------------------------------------
def _open_run_dir(run_dir: Path, settings: dict, resume: bool, overwrite: bool, dp, log) -> Path | None:
    """The checkpoint to resume from (checked against `settings`, the config as a dict), or None for
    a fresh start: refused when run_dir holds an earlier run, unless `overwrite` clears its outputs."""
    prepare_run_dir(run_dir)  # a writable folder, and no link where the run reads and writes, or one line
    checkpoint = check_resume(run_dir, settings) if resume else None  # whole, and saved with these shape settings
    dp.check_checkpoint(checkpoint)
    if resume and checkpoint is None:
        log(f"no checkpoint in {run_dir}: starting from scratch")
    if checkpoint is None and not overwrite:
        refuse_to_replace(run_dir, previous_run(run_dir))
    if checkpoint is None and (removed := dp.on_main(clear_previous_run, run_dir)):
        log(f"--overwrite: removed the previous run's {', '.join(removed)} from {run_dir}")
    return checkpoint


def _tasks(env_cfg: EnvConfig, sft_cfg: SFTConfig, tasks_cfg, eval_cfg: EvalConfig, seed: int, run_dir: Path, dp,
           log):
    """The training task source and the held-out tasks file (rank 0 writes it)."""
    space = get_task_space(env_cfg.id)
    check_env_features(env_cfg, sft_cfg, space)
    source = make_task_source_from_config(tasks_cfg, space, select_train_tasks(env_cfg, space, seed), seed=seed)
    eval_path = dp.on_main(write_eval_tasks, eval_cfg, env_cfg, space, run_dir)
    if eval_path is not None and (too_small := power_warning(len(load_split(eval_path)), eval_cfg.episodes_per_task)):
        log(f"WARNING: the held-out set is small: {too_small} (eval.num_tasks, eval.episodes_per_task)")
    return source, eval_path


def train(cfg: TrainConfig, resume: bool = False, log: Callable[[str], None] = print,
          on_iteration: Callable[[dict], None] | None = None, session=progress.CURRENT,
          overwrite: bool = False) -> dict:
    """Run (or resume) the configured pipeline; returns the summary also written to summary.json.
    A run dir holding an earlier run is refused (ConfigError) unless resume continues it or
    overwrite replaces it. session: where bars draw (agentgym.progress; by default the calling
    command's session)."""
    session = progress.resolve(session)
    if resume and (done := finished_run(run_dir_for(cfg), cfg.iterations)) is not None:
        log(finished_line(run_dir_for(cfg), done))  # left as it is, byte for byte
        return done
    quiet_transformers()
    cfg.torch_threads = set_torch_threads(cfg.torch_threads, log)  # config.yaml records the count used
    started = session_started = time.perf_counter()
    import_modules(cfg.imports)
    cfg.env.id = check_env_id(cfg.env.id)
    cfg.env.env_kwargs = {**cfg.env.env_kwargs, **env_reward_kwargs(cfg.env.reward)}  # an env's own reward mode
    reward = reward_hook(cfg.env.reward, load_judge(cfg.env.reward))  # or a reward over the env's: rubric, judge, ...
    dp = distributed.setup(cfg, log)  # torchrun ranks: checked here, before any work
    log = distributed.main_log(dp, log)
    env_pool = distributed.ray_env_pool(cfg.env.executor, cfg.policy.engine, cfg.ray, dp, log)  # env.executor=ray
    run_dir = run_dir_for(cfg)
    checkpoint = _open_run_dir(run_dir, cfg.to_dict(), resume, overwrite, dp, log)
    dp.on_main(save_config, cfg, run_dir / "config.yaml")
    torch.manual_seed(cfg.seed)
    source, eval_path = _tasks(cfg.env, cfg.sft, cfg.tasks, cfg.eval, cfg.seed, run_dir, dp, log)

    if cfg.distill.enabled and cfg.policy.model:  # a teacher that cannot serve is refused before SFT or RL start
        check_teacher(cfg.distill, cfg.policy.model, cfg.policy.device, cfg.policy.dtype)
    start_model, setup_info = dp.main_first(lambda: prepare_start_model(cfg, run_dir, log, session=session))
    policy = make_policy(cfg.policy, start_model)
    heads = build_heads(cfg.estimator, policy)
    if checkpoint is not None:
        policy.load_weights(checkpoint / "model")  # before FSDP shards them
    dp.broadcast_parameters(policy, heads)
    dp.shard_model(policy)  # data_parallel=fsdp: from here each rank holds a shard (trainers/fsdp.py)
    note = bf16_rollout(cfg.ppo.matmul_dtype, policy, cfg.policy.engine, dp.enabled)  # LoRA: frozen base in bf16
    if note:
        log(note)
    # syncs from `policy` whenever its weights changed
    engine = make_engine(EngineSettings(cfg.policy, cfg.seed, cfg.ray), policy, start_model)
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    teacher = load_teacher(cfg.distill, policy, cfg.policy.dtype, log)  # distill.teacher: refused in one line if unfit

    def evaluate():  # held-out success of the engine now, as the run's rollouts play and decode
        return heldout_result(cfg.eval, cfg.env, engine, eval_path, cfg.seed, cfg.rollout, session)

    state = {"iteration": 0, "evals": [], "setup": setup_info}
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, policy, optimizer, scheduler, heads, weights=False)
        started -= state.get("wall_seconds", 0.0)  # the run's wall time counts the sessions before this one
        dp.restore_rank_state(checkpoint, policy, log, optimizer)
        if "task_source" in state:
            source.load_state_dict(state["task_source"])
        log(f"resumed from {checkpoint} at iteration {state['iteration']}")
    logger = dp.on_main(MetricsLogger, run_dir, tensorboard="auto" if cfg.log.tensorboard else False,
                        wandb="auto" if cfg.log.wandb else False, config=cfg.to_dict(),
                        resume_from_step=state["iteration"] if checkpoint is not None else None,
                        otherwise=distributed.NullLogger())
    producer, finished = None, False
    try:
        # every rank alike (a resumed run's state holds its evaluations on every rank)
        if not state["evals"] and state["iteration"] == 0 and cfg.eval.before:
            if (ev := _evaluate_now(evaluate, cfg.log, run_dir, policy, state, dp)) is not None:  # rank 0's
                logger.log({"eval": ev}, step=0)
                log(f"held-out success before RL: {ev['success_rate']:.3f}")
            if cfg.checkpoint_every:
                # a real model's evaluation before RL can outlast many iterations (an hour on 2 cores): a run
                # killed before its first periodic checkpoint resumes after that evaluation, not before it
                state["wall_seconds"] = time.perf_counter() - started
                dp.save_checkpoint(save_checkpoint, run_dir, 0, policy, optimizer, scheduler, heads, state)
        producer = BatchProducer(cfg, policy, source, start_iteration=state["iteration"], engine=engine, dp=dp,
                                 executor=env_pool, session=session)
        if (store := frozen_states_for(cfg.ppo, cfg.policy.engine, policy, producer, heads)) is not None:
            log(f"LoRA on the top layers: the update starts at layer {store.layer} from the rollout's outputs of the "
                f"{store.layer} frozen layers below (ppo.reuse_frozen_states)")
        elif (why := frozen_states_unused(cfg.ppo, cfg.policy.engine, policy, producer, heads)) is not None:
            log(f"ppo.reuse_frozen_states: not used ({why}); the update runs the frozen layers itself")
        deadline = session_started + cfg.time_budget_s if cfg.time_budget_s else None
        said_unmeasured = False
        while state["iteration"] < cfg.iterations:
            if deadline is not None and dp.agree(time.perf_counter() > deadline):
                state["stopped_early"] = (f"safety time budget time_budget_s={cfg.time_budget_s:.0f} reached after "
                                          f"{state['iteration']} of {cfg.iterations} iterations")
                log(f"WARNING: {state['stopped_early']}: this is not the configured experiment")
                break
            metrics = run_iteration(cfg, state["iteration"], policy, optimizer, scheduler, producer, heads, dp, reward,
                                    teacher)
            if (note := metrics.pop("unmeasured", None)) is not None and not said_unmeasured:
                log(note)  # once a run: the engine records no logprobs, every iteration alike
                said_unmeasured = True
            state["rl_seconds"] = state.get("rl_seconds", 0.0) + metrics["time"]["iteration_s"]
            state["task_source"] = producer.source.state_dict()
            state["iteration"] += 1
            if cfg.eval.every and state["iteration"] % cfg.eval.every == 0 and state["iteration"] < cfg.iterations:
                if (ev := _evaluate_now(evaluate, cfg.log, run_dir, policy, state, dp)) is not None:
                    metrics["eval"] = ev
            logger.log(metrics, step=state["iteration"])
            if on_iteration is not None:
                on_iteration(metrics)
            state["wall_seconds"] = time.perf_counter() - started  # saved with each checkpoint
            if cfg.checkpoint_every and state["iteration"] % cfg.checkpoint_every == 0:
                dp.save_checkpoint(save_checkpoint, run_dir, state["iteration"], policy, optimizer, scheduler, heads, state)
        # rank 0 holds the evaluations; every rank must enter full_weights together
        if dp.agree(dp.on_main(lambda: not state["evals"] or state["evals"][-1]["iteration"] != state["iteration"],
                               otherwise=False)):
            if (ev := _evaluate_now(evaluate, cfg.log, run_dir, policy, state, dp)) is not None:
                logger.log({"eval": ev}, step=state["iteration"])
        state["wall_seconds"] = time.perf_counter() - started
        dp.save_checkpoint(save_checkpoint, run_dir, state["iteration"], policy, optimizer, scheduler, heads, state)
        dp.save_policy(policy, run_dir / "final_model")
        finished = True
    except Exception as exc:  # noqa: BLE001 - a full disk raises OSError, or safetensors' own SafetensorError
        if is_disk_full(exc):
            raise disk_full_error(run_dir, exc) from None
        raise
    finally:
        if producer is not None:
            producer.close()
        logger.close()
        engine.close()  # the vLLM engine, Ray replicas
        distributed.teardown(dp, env_pool, finished)
    return dp.on_main(_summarize, cfg.eval, cfg.log, cfg.iterations, cfg.seed, run_dir, state, started, log,
                      otherwise={"run_dir": str(run_dir), "iterations": state["iteration"], "rank": dp.rank})


def heldout_change(summary: dict) -> str:
    """The summary's held-out figures in words: before -> after with the gain's interval, or the
    final figure alone when nothing was evaluated before RL (eval.before=false)."""
    if summary["heldout_success_before"] is None:
        return f"{summary['heldout_success_after']:.3f} after RL (eval.before=false: no evaluation before it)"
    lo, hi = summary["heldout_gain_ci"]
    return (f"{summary['heldout_success_before']:.3f} -> {summary['heldout_success_after']:.3f} "
            f"(gain {summary['heldout_gain']:+.3f}, 95% CI [{lo:+.3f}, {hi:+.3f}])")


def _summarize(eval_cfg: EvalConfig, log_cfg: LogConfig, iterations: int, seed: int, run_dir: Path, state: dict,
               started: float, log) -> dict:
    """summary.json: the held-out success before and after RL with the paired interval of the gain
    (None without an evaluation before RL: eval.before=false)."""
    last = state["evals"][-1]
    first = state["evals"][0] if state["evals"][0]["iteration"] == 0 else None
    gain = paired_gain(first.get("per_task_success", {}), last.get("per_task_success", {}), seed=seed) \
        if first is not None else None
    summary = {
        "run_dir": str(run_dir),
        "iterations": state["iteration"],
        "iterations_configured": iterations,
        "stopped_early": state.get("stopped_early"),  # None, or why RL stopped before cfg.iterations
        "heldout_tasks": len(last.get("per_task_success", {})),
        "episodes_per_task": eval_cfg.episodes_per_task,
        # the final evaluation, never the best one seen: the best of several noisy evals is biased upward
        "heldout_success_before": first["success_rate"] if first is not None else None,
        "heldout_success_after": last["success_rate"],
        "heldout_gain": gain.value if gain is not None else None,
        "heldout_gain_ci": [gain.low, gain.high] if gain is not None else None,  # paired per-task bootstrap, 95%
        "evals": [{"iteration": e["iteration"], "success_rate": e["success_rate"]} for e in state["evals"]],
        "wall_seconds": time.perf_counter() - started,
        "rl_seconds": state.get("rl_seconds", 0.0),
        "setup": state.get("setup", {}),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    if log_cfg.plot:
        try:
            plot_learning_curves(run_dir, keys=[k for k in ("rollout/success_rate", "eval/success_rate",
                                                            "train/pg_loss", "adv/abs_mean")])
        except Exception as exc:  # a plot must never fail a finished run
            log(f"(learning-curve plot skipped: {exc})")
    return summary
