"""The training loop: collect -> advantages -> token-level PPO-clip update -> log -> eval -> checkpoint.

A handful of plain functions, in the order they run (CleanRL style):

    train(cfg)                      the whole pipeline of one run (tiny model, SFT, RL, eval)
      prepare_start_model           (setup.py) build the tiny model / SFT warm start when asked
      select_train_tasks            (task_selection.py) train split (filtered, held-out ids refused),
                                    a task file or fresh tasks
      run_iteration                 one RL iteration:
        collect                     agentgym.collect: tasks x group_size episodes
        tokenize_trajectories       (tokenize.py) the token sequences the policy generated
        score_sequences             (value/progress heads, recompute) one no-grad pass: values, features, logprobs
        compute_advantages          trainers.estimators
        make_samples                (tokenize.py) sequences + advantages -> what the update trains on
        ppo_update                  minibatches x epochs of the clipped loss
      evaluate_policy               held-out success (agentgym.evaluation)
      save_checkpoint               exact resume

Every random draw of iteration k comes from generators seeded by (seed, k) or restored from
the checkpoint, so "train N iterations" equals "train k, resume, train N-k" bit for bit.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from agentgym.errors import AgentGymError
from agentgym.trainers.config import TrainConfig, save_config
from agentgym.trainers.setup import (build_heads, clear_previous_run, make_optimizer, make_policy, prepare_start_model,
                                     quiet_transformers, run_dir_for)
from agentgym.trainers.task_selection import select_train_tasks, write_eval_tasks
from agentgym.trainers.tokenize import (Sample, TokenSequence, collate, make_samples, pad_sequences,
                                        tokenize_trajectories)


class TrainingDiverged(AgentGymError):
    """Non-finite advantages, loss or gradients: training stops, the last checkpoint is kept."""


# --- setup ------------------------------------------------------------------------------------


# --- the per-iteration pieces ---------------------------------------------------------------
def _micro_batches(samples: list, size: int):
    for start in range(0, len(samples), size):
        yield samples[start:start + size]


@torch.no_grad()
def score_sequences(policy, sequences: list[TokenSequence], micro: int, want_hidden: bool):
    """One no-grad pass: per sequence its target logprobs and (optionally) last hidden states."""
    model = policy.model
    was_training = model.training
    model.eval()
    out = []
    try:
        for chunk in _micro_batches(sequences, micro):
            batch = pad_sequences(chunk, policy.tokenizer.pad_token_id, device=policy.device)
            from agentgym.trainers.ppo import token_logprobs

            logp, hidden = token_logprobs(model, batch["input_ids"], batch["attention_mask"], want_hidden)
            for b, s in enumerate(chunk):
                out.append((logp[b, : len(s) - 1].float().cpu(), None if hidden is None else hidden[b, : len(s)].float()))
    finally:
        model.train(was_training)
    return out


def per_step_arrays(sequences: list[TokenSequence], trajectories,
                    fill: Callable[[TokenSequence, int], float]) -> list[np.ndarray]:
    """Per trajectory, one value per step gathered from the sequences (0 where a step has none)."""
    arrays = [np.zeros(len(t.steps), dtype=np.float64) for t in trajectories]
    for s in sequences:
        for k, (i, t) in enumerate(s.step_refs):
            arrays[i][t] = fill(s, k)
    return arrays


def _check_finite(name: str, value, iteration: int) -> None:
    if isinstance(value, torch.Tensor):
        ok = bool(torch.isfinite(value).all())
    else:
        ok = bool(np.all(np.isfinite(np.asarray(value, dtype=np.float64))))
    if not ok:
        raise TrainingDiverged(f"iteration {iteration}: non-finite {name}; training stopped, the last checkpoint "
                               "is kept (lower ppo.lr or check the rewards)")


def equal_minibatches(order: np.ndarray, max_size: int) -> list[np.ndarray]:
    """`order` cut into ceil(n / max_size) minibatches whose sizes differ by at most one. Slicing
    by max_size would leave a small remainder (26 of 282 samples) that still gets a full optimizer
    step: its gradient is noisier and, under token-mean, weighs as much as a full minibatch's."""
    if len(order) == 0:
        return []
    return np.array_split(order, math.ceil(len(order) / max_size))


def ppo_update(cfg: TrainConfig, policy, optimizer, scheduler, samples: list[Sample], rng: np.random.Generator,
               iteration: int, value_head=None) -> dict:
    from agentgym.trainers.async_rollout import off_policy_kwargs
    from agentgym.trainers.ppo import ImportanceStats, clip_range, ppo_clip_loss, reference_logprobs, token_logprobs

    from agentgym.trainers.distributed import current
    from agentgym.trainers.estimators import estimator_spec

    dp = current()  # data parallel: `samples` holds ghosts for other ranks' samples (trainers/distributed.py)
    pc = cfg.ppo
    asym = pc.asymmetric_clip
    if asym is None:  # the estimator's declared default (LOOP's asymmetric clip)
        asym = estimator_spec(cfg.estimator.name).asymmetric_clip
    lo, hi = clip_range(pc.clip_eps, asym)
    model = policy.model
    model.train()
    params = policy.trainable_parameters() + (list(value_head.parameters()) if value_head is not None else [])
    use_kl = pc.kl_coef > 0
    totals: dict[str, float] = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "approx_kl": 0.0,
                                "value_loss": 0.0, "grad_norm": 0.0}
    ratio_max, n_updates, n_micro = 0.0, 0, 0
    minibatch_ratio_max: list[float] = []  # per optimizer step: the first one's is 1 up to float error
    off_policy, weights = off_policy_kwargs(cfg), ImportanceStats()  # {} and no stats when synchronous
    for _ in range(pc.epochs):
        order = rng.permutation(len(samples))
        for index_chunk in equal_minibatches(order, pc.minibatch_size):
            minibatch = [samples[j] for j in index_chunk]
            step_ratio_max = 0.0
            denom = float(sum(s.num_loss_tokens for s in minibatch)) if pc.loss_agg == "token-mean" else float(len(minibatch))
            n_values = sum(len(s.value_targets) for s in minibatch)
            optimizer.zero_grad(set_to_none=True)
            micro_batches = list(_micro_batches(dp.local(minibatch), pc.micro_batch_size))
            dp.keep_step(policy, len(micro_batches), pc.entropy_coef > 0, use_kl)  # FSDP: passes pair up over ranks
            for micro in micro_batches:
                batch = collate(micro, policy.tokenizer.pad_token_id, device=policy.device)
                entropy = None
                if pc.entropy_coef > 0:
                    logp, hidden, entropy = token_logprobs(model, batch["input_ids"], batch["attention_mask"],
                                                           value_head is not None, want_entropy=True)
                else:
                    logp, hidden = token_logprobs(model, batch["input_ids"], batch["attention_mask"], value_head is not None)
                ref_logp = None
                if use_kl:
                    ref_logp = reference_logprobs(policy, batch["input_ids"], batch["attention_mask"])
                loss, st = ppo_clip_loss(logp, batch["old_logprobs"], batch["advantages"], batch["loss_mask"], lo, hi,
                                         pc.loss_agg, max(denom, 1.0), ref_logp, pc.kl_coef, entropy, pc.entropy_coef,
                                         prox_logp=batch.get("prox_logprobs"), **off_policy)
                weights.add(st)
                if value_head is not None and n_values:
                    preds, targets = [], []
                    for b, s in enumerate(micro):
                        if s.value_targets:
                            preds.append(value_head(hidden[b, s.value_positions]))
                            targets.extend(s.value_targets)
                    if preds:
                        v = torch.cat(preds)
                        t = torch.tensor(targets, dtype=v.dtype, device=v.device)
                        v_loss = ((v - t) ** 2).sum() / n_values
                        loss = loss + pc.value_coef * v_loss
                        totals["value_loss"] += float(v_loss.detach())
                _check_finite("loss", loss.detach(), iteration)
                loss.backward()
                for key in ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl"):
                    totals[key] += getattr(st, key)
                step_ratio_max = max(step_ratio_max, st.ratio_max)
                n_micro += 1
            ratio_max = max(ratio_max, step_ratio_max)
            minibatch_ratio_max.append(step_ratio_max)
            dp.sync_gradients(params)
            grad_norm = dp.clip_grad_norm(params, pc.max_grad_norm)
            _check_finite("gradient norm", grad_norm, iteration)
            optimizer.step()
            scheduler.step()
            totals["grad_norm"] += float(grad_norm)
            n_updates += 1
    model.eval()
    totals, n_micro, ratio_max = dp.reduce_stats(totals, n_micro, ratio_max)
    out = {k: v / max(n_updates, 1) for k, v in totals.items()}
    out["clip_frac"] = totals["clip_frac"] / max(n_micro, 1)
    out["approx_kl"] = totals["approx_kl"] / max(n_micro, 1)
    out["ratio_max"] = ratio_max
    out["ratio_max_first_minibatch"] = minibatch_ratio_max[0] if minibatch_ratio_max else 0.0
    # one scalar per optimizer step (metrics.jsonl keeps numbers: train/ratio_max_per_minibatch/0, /1, ...)
    out["ratio_max_per_minibatch"] = {str(i): r for i, r in enumerate(minibatch_ratio_max)}
    out["optimizer_steps"] = n_updates
    out.update(weights.summary())
    return out


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
    }


def run_iteration(cfg: TrainConfig, iteration: int, policy, optimizer, scheduler, source,
                  heads: dict, rollouts=None) -> dict:
    from agentgym.policies.base import SamplingParams
    from agentgym.rollout import collect
    from agentgym.trainers.distributed import current
    from agentgym.trainers.estimators import compute_advantages

    dp = current()
    t0 = time.perf_counter()
    if rollouts is None:
        rng = np.random.default_rng([cfg.seed, iteration])
        tasks = source.next_tasks(cfg.rollout.tasks_per_iter)  # split or evolving pool, by curriculum
        tasks, first_group = dp.shard(tasks)  # data parallel: this rank's block of whole groups
        sampling = dp.sampling(SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                              max_new_tokens=cfg.rollout.max_new_tokens, seed=int(rng.integers(2**31))))
        with dp.full_weights(policy):  # FSDP: gathered once for the whole rollout
            trajectories = collect(cfg.env.id, tasks, policy, cfg.rollout.group_size,
                                   seed=int(rng.integers(2**31)) + first_group, sampling=sampling,
                                   executor=cfg.env.executor, env_kwargs=cfg.env.env_kwargs, chat=cfg.env.chat,
                                   max_turns=cfg.env.max_turns)
    else:  # made ahead under the staleness bound and/or with long-tail control (trainers/async_rollout.py)
        batch = rollouts.get(iteration)
        rng, trajectories = batch.rng, batch.trajectories
    t_rollout = time.perf_counter() - t0
    if hasattr(policy, "sleep"):
        policy.sleep()  # vLLM on CUDA: give its GPU memory to the update (no-op on CPU); generate wakes it

    # tokens first; the heads read them; the advantages come next; samples are made from both, once
    sequences = tokenize_trajectories(trajectories, cfg.ppo.sample_mode)
    est_cfg = cfg.estimator
    value_head, progress_head = heads.get("value"), heads.get("progress")
    values = progress = recomputed = None
    if value_head is not None or progress_head is not None or cfg.ppo.recompute_old_logprobs:
        with dp.full_weights(policy):
            scored = score_sequences(policy, sequences, cfg.ppo.micro_batch_size, want_hidden=True)
        if cfg.ppo.recompute_old_logprobs:
            recomputed = [[0.0] + logp.tolist() for logp, _ in scored]
        hidden = {id(s): h for s, (_, h) in zip(sequences, scored)}
        if value_head is not None:
            with torch.no_grad():
                values = per_step_arrays(sequences, trajectories,
                                         lambda s, k: float(value_head(hidden[id(s)][s.value_positions[k]][None])[0]))
        if progress_head is not None:
            progress = fit_spa_progress(progress_head, sequences, trajectories, hidden, est_cfg, cfg.seed + iteration)
    try:
        advantages = compute_advantages(trajectories, est_cfg, values=values, progress=progress)
    except ValueError as exc:
        raise TrainingDiverged(f"iteration {iteration}: {exc}; training stopped, the last checkpoint is kept") from None
    for a in advantages:
        _check_finite("advantages", a, iteration)
    all_trajectories, all_advantages = dp.gather(trajectories, advantages)  # every rank's, for the source and logs
    if dp.is_main:
        from agentgym.trainers.records import save_iteration

        save_iteration(cfg, iteration, all_trajectories, all_advantages, est_cfg, policy)
    source.update(all_trajectories, all_advantages)
    returns = [a + v for a, v in zip(advantages, values)] if values is not None else None
    samples = make_samples(sequences, advantages, drop_abs_adv_below=cfg.ppo.drop_abs_adv_below, returns=returns,
                           old_logprobs=recomputed)
    samples = dp.global_samples(samples)
    if rollouts is not None:
        samples = rollouts.prepare_update(policy, samples)  # decoupled PPO: logprobs of the weights at update start
    t1 = time.perf_counter()
    update = ppo_update(cfg, policy, optimizer, scheduler, samples, rng, iteration, value_head) if samples else {}
    t_update = time.perf_counter() - t1
    all_adv = np.concatenate([a for a in all_advantages if len(a)] or [np.zeros(1)])
    train_tokens = sum(len(s) for s in samples) * cfg.ppo.epochs
    metrics = {
        "iteration": iteration + 1,
        "rollout": _rollout_stats(all_trajectories),
        "adv": {"mean": float(all_adv.mean()), "std": float(all_adv.std()), "abs_mean": float(np.abs(all_adv).mean()),
                "nonzero_frac": float(np.mean(np.abs(all_adv) > 1e-8))},
        "train": {**update, "samples": len(samples), "tokens": train_tokens},
        "tasks": source.metrics(),
        "time": {"rollout_s": t_rollout, "update_s": t_update, "iteration_s": time.perf_counter() - t0},
    }
    if rollouts is not None:  # publishes the new weights to the producer
        metrics["async"] = rollouts.finish(iteration, policy, batch, samples)
    metrics["time"]["train_tokens_per_s"] = train_tokens / max(t_update, 1e-9)
    metrics["time"]["rollout_tokens_per_s"] = metrics["rollout"]["response_tokens"] / max(t_rollout, 1e-9)
    return metrics


def fit_spa_progress(head, sequences, trajectories, hidden: dict, est_cfg, seed: int) -> list[np.ndarray]:
    """SPA: per-step features = the policy's last hidden state at the end of each step's response;
    the head is refit on this batch (warm-started from the previous iteration) so that its
    per-step outputs sum to each episode's outcome, then predicts the contributions c_t."""
    from agentgym.trainers.spa_progress import fit_progress, predict_progress

    size = next(head.parameters()).shape[-1]
    feats = [torch.zeros((len(t.steps), size)) for t in trajectories]
    for s in sequences:
        for k, (i, t) in enumerate(s.step_refs):
            feats[i][t] = hidden[id(s)][s.response_ends[k]].cpu()
    live = [i for i, t in enumerate(trajectories) if not t.infra_error and t.steps]
    outcome = (lambda t: float(t.success)) if est_cfg.outcome == "success" else (lambda t: float(t.score))
    fit_progress(head, [feats[i] for i in live], [outcome(trajectories[i]) for i in live], epochs=50, lr=1e-2,
                 seed=seed)
    predicted = predict_progress(head, [f if len(f) else torch.zeros((0, size)) for f in feats])
    return [p if len(p) == len(t.steps) else np.zeros(len(t.steps)) for p, t in zip(predicted, trajectories)]


def evaluate_policy(cfg: TrainConfig, policy, eval_path: Path, seed: int, iteration: int | None = None) -> dict:
    from agentgym.policies.base import SamplingParams
    from agentgym.evaluation.evaluate import evaluate

    sampling = SamplingParams(temperature=cfg.eval.temperature,
                              max_new_tokens=cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens, seed=seed)
    result = evaluate(cfg.env.id, policy, split=str(eval_path), episodes_per_task=cfg.eval.episodes_per_task,
                      sampling=sampling, chat=cfg.env.chat,
                      env_kwargs=cfg.env.env_kwargs, seed=seed, policy_name="HFPolicy")
    from agentgym.trainers.records import save_evaluation

    save_evaluation(cfg, result, iteration, policy)  # for `agentgym view`, when log.save_trajectories_every > 0
    out = result.summary()
    out["wall_s"] = result.wall_seconds
    # per-task success, so that two evaluations on the same tasks give a paired interval of the gain
    out["per_task_success"] = {t["task_id"]: t["successes"] / t["episodes"] for t in result.per_task if t["episodes"]}
    return out


# --- the run ----------------------------------------------------------------------------------


def train(cfg: TrainConfig, resume: bool = False, log: Callable[[str], None] = print,
          on_iteration: Callable[[dict], None] | None = None) -> dict:
    """Run (or resume) the configured pipeline; returns the summary also written to summary.json."""
    import agentgym  # noqa: F401  registers the built-in envs
    from agentgym.registration import check_env_id, get_task_space
    from agentgym.trainers.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
    from agentgym.trainers.logging_utils import MetricsLogger
    from agentgym.tasks.splits import load_split
    from agentgym.trainers import distributed

    quiet_transformers()
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    started = time.perf_counter()
    from agentgym.trainers.features import check_env_features, import_modules

    import_modules(cfg.imports)
    cfg.env.id = check_env_id(cfg.env.id)
    dp = distributed.setup(cfg, log)  # torchrun ranks and Ray: checked here, before any work
    log = distributed.main_log(log)
    run_dir = run_dir_for(cfg)
    checkpoint = latest_checkpoint(run_dir) if resume else None
    dp.check_checkpoint(checkpoint)
    if resume and checkpoint is None:
        log(f"no checkpoint in {run_dir}: starting from scratch")
    run_dir.mkdir(parents=True, exist_ok=True)
    if dp.is_main and checkpoint is None and (removed := clear_previous_run(run_dir)):
        log(f"fresh run in {run_dir}: removed the previous run's {', '.join(removed)} (pass --resume to continue it)")
    if dp.is_main:
        save_config(cfg, run_dir / "config.yaml")
    torch.manual_seed(cfg.seed)
    space = get_task_space(cfg.env.id)
    check_env_features(cfg, space)
    train_tasks = select_train_tasks(cfg, space)
    from agentgym.tasks.source import make_task_source_from_config

    source = make_task_source_from_config(cfg.tasks, space, train_tasks, seed=cfg.seed)
    eval_path = write_eval_tasks(cfg, space, run_dir) if dp.is_main else None
    from agentgym.evaluation.stats import power_warning

    if dp.is_main and (too_small := power_warning(len(load_split(eval_path)), cfg.eval.episodes_per_task)):
        log(f"WARNING: the held-out set is small: {too_small} (eval.num_tasks, eval.episodes_per_task)")

    start_model, setup_info = dp.main_first(lambda: prepare_start_model(cfg, run_dir, log))
    policy = make_policy(cfg, start_model)
    heads = build_heads(cfg, policy)
    if checkpoint is not None:
        policy.load_weights(checkpoint / "model")  # before FSDP shards them
    dp.broadcast_parameters(policy, heads)
    dp.shard_model(policy)  # data_parallel=fsdp: from here each rank holds a shard (trainers/fsdp.py)
    optimizer, scheduler = make_optimizer(cfg, policy, heads)
    state = {"iteration": 0, "evals": [], "setup": setup_info}
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, policy, optimizer, scheduler, heads, weights=False)
        dp.restore_rank_state(checkpoint, policy, log, optimizer)
        if "task_source" in state:
            source.load_state_dict(state["task_source"])
        log(f"resumed from {checkpoint} at iteration {state['iteration']}")
    logger = MetricsLogger(run_dir, tensorboard="auto" if cfg.log.tensorboard else False,
                           wandb="auto" if cfg.log.wandb else False, config=cfg.to_dict(),
                           resume_from_step=state["iteration"] if checkpoint is not None else None
                           ) if dp.is_main else distributed.NullLogger()
    rollouts = None
    try:
        if not state["evals"]:
            with dp.full_weights(policy):  # every rank enters; rank 0 evaluates
                if dp.is_main:
                    ev = evaluate_policy(cfg, policy, eval_path, cfg.seed, iteration=0)
                    state["evals"].append({"iteration": 0, **ev})
                    logger.log({"eval": ev}, step=0)
                    log(f"held-out success before RL: {ev['success_rate']:.3f}")
        from agentgym.trainers.async_rollout import uses_engine

        if uses_engine(cfg):  # async rollouts / long-tail control; otherwise the synchronous loop, unchanged
            from agentgym.trainers.async_rollout import AsyncRollouts

            rollouts = AsyncRollouts(cfg, policy, source, start_iteration=state["iteration"])
            source = rollouts.source
        deadline = started + cfg.time_budget_s if cfg.time_budget_s else None
        while state["iteration"] < cfg.iterations:
            if deadline is not None and dp.agree(time.perf_counter() > deadline):
                state["stopped_early"] = (f"safety time budget time_budget_s={cfg.time_budget_s:.0f} reached after "
                                          f"{state['iteration']} of {cfg.iterations} iterations")
                log(f"WARNING: {state['stopped_early']}: this is not the configured experiment")
                break
            it = state["iteration"]
            metrics = run_iteration(cfg, it, policy, optimizer, scheduler, source, heads, rollouts)
            state["rl_seconds"] = state.get("rl_seconds", 0.0) + metrics["time"]["iteration_s"]
            state["task_source"] = source.state_dict()
            state["iteration"] = it + 1
            if cfg.eval.every and state["iteration"] % cfg.eval.every == 0 and state["iteration"] < cfg.iterations:
                with dp.full_weights(policy):
                    if dp.is_main:
                        ev = evaluate_policy(cfg, policy, eval_path, cfg.seed, iteration=state["iteration"])
                        state["evals"].append({"iteration": state["iteration"], **ev})
                        metrics["eval"] = ev
            logger.log(metrics, step=state["iteration"])
            if on_iteration is not None:
                on_iteration(metrics)
            if cfg.checkpoint_every and state["iteration"] % cfg.checkpoint_every == 0:
                dp.save_checkpoint(save_checkpoint, run_dir, state["iteration"], policy, optimizer, scheduler, heads, state)
        # rank 0 holds the evaluations; every rank must enter full_weights together
        if dp.agree(dp.is_main and state["evals"][-1]["iteration"] != state["iteration"]):
            with dp.full_weights(policy):
                if dp.is_main:
                    ev = evaluate_policy(cfg, policy, eval_path, cfg.seed, iteration=state["iteration"])
                    state["evals"].append({"iteration": state["iteration"], **ev})
                    logger.log({"eval": ev}, step=state["iteration"])
        dp.save_checkpoint(save_checkpoint, run_dir, state["iteration"], policy, optimizer, scheduler, heads, state)
        dp.save_policy(policy, run_dir / "final_model")
    finally:
        if rollouts is not None:
            rollouts.close()
        logger.close()
        if hasattr(policy, "close"):
            policy.close()  # the vLLM engine
        distributed.teardown()
    if not dp.is_main:
        return {"run_dir": str(run_dir), "iterations": state["iteration"], "rank": dp.rank}
    from agentgym.evaluation.stats import paired_gain

    first, last = state["evals"][0], state["evals"][-1]
    gain = paired_gain(first.get("per_task_success", {}), last.get("per_task_success", {}), seed=cfg.seed)
    summary = {
        "run_dir": str(run_dir),
        "iterations": state["iteration"],
        "iterations_configured": cfg.iterations,
        "stopped_early": state.get("stopped_early"),  # None, or why RL stopped before cfg.iterations
        "heldout_tasks": len(last.get("per_task_success", {})),
        "episodes_per_task": cfg.eval.episodes_per_task,
        # the final evaluation, never the best one seen: the best of several noisy evals is biased upward
        "heldout_success_before": first["success_rate"],
        "heldout_success_after": last["success_rate"],
        "heldout_gain": gain.value,
        "heldout_gain_ci": [gain.low, gain.high],  # paired per-task bootstrap, 95%
        "evals": [{"iteration": e["iteration"], "success_rate": e["success_rate"]} for e in state["evals"]],
        "wall_seconds": time.perf_counter() - started,
        "rl_seconds": state.get("rl_seconds", 0.0),
        "setup": state.get("setup", {}),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    if cfg.log.plot:
        try:
            from agentgym.trainers.logging_utils import plot_learning_curves

            plot_learning_curves(run_dir, keys=[k for k in ("rollout/success_rate", "eval/success_rate",
                                                            "train/pg_loss", "adv/abs_mean")])
        except Exception as exc:  # a plot must never fail a finished run
            log(f"(learning-curve plot skipped: {exc})")
    return summary


