"""SFT: behaviour cloning on oracle trajectories, the warm start for RL.

The oracle (OraclePolicy, replaying the task space's plan) plays train tasks through the same
ChatEnv settings RL will use; each step's chat prompt is tokenized with the model's chat
template (`add_generation_prompt=True`) and the oracle's reply text (e.g.
`<action>open fridge 1</action>`) plus the eos token is the target. Cross-entropy on the
target tokens only. Oracle replies have no generated ids, so tokenizing them here is the
one place text becomes tokens.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from agentgym import progress
from agentgym.trainers.config import EnvConfig, SFTConfig
from agentgym.trainers.samples import Sample, collate, sft_sample
from agentgym.policies.scripted import OraclePolicy
from agentgym.registration import get_task_space
from agentgym.rollout import collect
from agentgym.continuation import TokenContinuation
from agentgym.trainers.ppo import token_logprobs
from agentgym.trainers.precision import update_autocast
from agentgym.trainers.task_selection import select_train_tasks
from agentgym.chat import ChatConfig
from agentgym.errors import ConfigError
from agentgym.policies.base import SamplingParams
from agentgym.trainers.dagger import dagger_rounds


def oracle_trajectories(env_id: str, tasks: list, chat: dict | None, env_kwargs: dict | None, seed: int = 0,
                        executor: str = "inprocess", slip_prob: float = 0.0, search: bool = False,
                        dawdle_prob: float = 0.0, filter_success: bool = True, tags: bool = False,
                        session=progress.CURRENT):
    """The demonstrator's episodes on `tasks` (infra errors dropped); with `filter_success` only
    those that reached the goal, otherwise failed ones too (what an unfiltered log of it holds).
    `tags`: its replies open with the meta-reasoning tag its rule picks (OraclePolicy(tags=True)).
    session: where the rollout's bar draws (agentgym.progress)."""

    oracle = OraclePolicy(get_task_space(env_id), slip_prob=slip_prob, seed=seed, search=search,
                          dawdle_prob=dawdle_prob, tags=tags)
    trajs = collect(env_id, tasks, oracle, group_size=1, seed=seed, chat=chat,
                    env_kwargs=env_kwargs, executor=executor, session=session)
    return [t for t in trajs if not t.infra_error and (t.success or not filter_success)]


def sft_samples(policy, trajectories) -> list[Sample]:
    """One sample per valid oracle step; invalid steps (an oracle's slips) are context, never targets."""
    samples = []
    for traj in trajectories:
        for step in traj.steps:
            if not step.action_valid:
                continue
            if step.messages is None:
                raise ValueError("SFT needs the chat prompt of every step: collect with record_messages=True")
            samples.append(sft_sample(policy.encode_prompt(step.messages), policy.encode_response(step.text)))
    return samples


def sft_episode_samples(policy, trajectories) -> list[Sample]:
    """history="full": one sample per episode instead of one per step. The conversation is built
    turn by turn as the rollout engine continues it (agentgym.continuation): the demonstrator's
    replies tokenized once, the template's ids for what follows each reply in between (masked), so
    each target token has the very context its per-step sample gives it, computed once: a 12-turn
    episode costs one pass over its final length instead of twelve over growing prompts.
    Where the template rewrites earlier turns, or the conversation outgrows the prompt budget, the
    episode goes on in a new sample (the per-step layout)."""

    continuation = TokenContinuation(policy, on_mismatch="per-turn")
    budget = getattr(policy, "max_prompt_tokens", None)
    samples: list[Sample] = []

    def close(ids: list[int], mask: list[int]) -> None:
        if any(mask):
            samples.append(Sample(input_ids=ids, loss_mask=mask, old_logprobs=[0.0] * len(ids),
                                  advantages=[float(m) for m in mask]))

    for traj in trajectories:
        ids: list[int] = []
        mask: list[int] = []
        before = None
        for step in traj.steps:
            if step.messages is None:
                raise ValueError("SFT needs the chat prompt of every step: collect with record_messages=True")
            tail = continuation.between(before, step.messages, True) if before is not None else None
            if tail is None or (budget and len(ids) + len(tail) > budget):
                close(ids, mask)
                ids = policy.encode_prompt(step.messages)
                mask = [0] * len(ids)
            else:
                ids, mask = ids + tail, mask + [0] * len(tail)
            reply = policy.encode_response(step.text)
            # an invalid step (a slip) is context, never a target
            ids, mask = ids + reply, mask + [int(step.action_valid)] * len(reply)
            before = step.messages
        close(ids, mask)
    return samples


def sft_loss(model, batch, denom: float | None = None) -> torch.Tensor:
    """Mean cross-entropy of the batch's target tokens (over `denom` targets when given: a
    micro-batch's share of a larger batch's mean). The LM head runs at the targets alone (a real
    model's 49k-way logits at every prompt token would be most of the memory and a fifth of the FLOPs)."""
    mask = batch["loss_mask"]
    logp, _ = token_logprobs(model, batch["input_ids"], batch["attention_mask"], positions=mask)
    return -(logp * mask).sum() / (denom if denom is not None else mask.sum().clamp(min=1.0))


def train_sft(policy, samples: list[Sample], epochs: int, lr: float, batch_size: int, seed: int = 0,
              weight_decay: float = 0.0, max_steps: int | None = None, log: Callable[[str], None] | None = None,
              max_seconds: float | None = None, session=progress.CURRENT, matmul_dtype: str = "fp32",
              dtype_setting: str = "ppo.matmul_dtype") -> dict:
    """Cross-entropy on the targets of `samples`; stops after `epochs`, `max_steps` optimizer steps or
    `max_seconds` of wall time (the "SFT for as long as RL ran" baseline), whichever comes first.
    session: where its bar draws (agentgym.progress; by default the calling command's session).
    matmul_dtype: "bf16" runs each step's forward under bf16 autocast (trainers/precision.py), a
    fresh context per step: autocast keeps its bf16 copy of a trained weight until its outermost
    context exits, so one context around the whole loop would keep computing with the weights of
    the first step (LoRA: B = 0, the loss stuck at its start). dtype_setting: the setting an error names."""
    update_autocast(matmul_dtype, policy.device, setting=dtype_setting)  # refuses bf16 without it, before any work
    model = policy.model
    model.train()
    params = policy.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    total_steps = epochs * ((len(samples) + batch_size - 1) // batch_size)
    if max_steps:
        total_steps = min(total_steps, max_steps)
    # cosine decay: a from-scratch tiny model needs a high lr early and a low one to settle
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * min(s, total_steps) / max(total_steps, 1))))
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    step = 0
    t0 = time.perf_counter()

    def out_of_budget() -> bool:
        return bool(max_steps and step >= max_steps) or bool(max_seconds and time.perf_counter() - t0 >= max_seconds)

    with progress.bar("SFT", total=total_steps, unit="steps", every=60.0, session=session) as bar:  # + a line per epoch
        for epoch in range(epochs):
            order = rng.permutation(len(samples))
            for start in range(0, len(samples), batch_size):
                chunk = [samples[j] for j in order[start:start + batch_size]]
                batch = collate(chunk, policy.tokenizer.pad_token_id, device=policy.device)
                with update_autocast(matmul_dtype, policy.device):
                    loss = sft_loss(model, batch)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"SFT loss became {float(loss)} at step {step}: lower sft.lr")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()
                scheduler.step()
                losses.append(float(loss.detach()))
                step += 1
                bar.update(step, info=f"loss {losses[-1]:.4f}")
                if out_of_budget():
                    break
            if not losses:  # no samples: no step, no loss to show
                break
            epoch_loss = np.mean(losses[-max(1, len(samples) // batch_size):])
            if bar.active:  # a line per epoch with elapsed time and ETA, on a terminal and in a log
                bar.line(f"epoch {epoch + 1}/{epochs} loss {epoch_loss:.4f}")
            elif log is not None:
                log(f"SFT epoch {epoch + 1}/{epochs}: loss {epoch_loss:.4f} ({time.perf_counter() - t0:.0f}s)")
            if out_of_budget():
                break
    model.eval()
    return {"steps": step, "samples": len(samples), "final_loss": float(np.mean(losses[-5:])) if losses else float("nan"),
            "first_loss": losses[0] if losses else float("nan"), "seconds": time.perf_counter() - t0}


def run_sft(policy, sft_cfg: SFTConfig, env_cfg: EnvConfig, seed: int, log: Callable[[str], None] | None = None,
            session=progress.CURRENT, student_sampling: SamplingParams | None = None) -> dict:
    """SFT `policy` in place on oracle trajectories of env_cfg's training tasks (bars in `session`;
    multiplies in sft.matmul_dtype), then sft.dagger's rounds, in which the clone plays with
    `student_sampling` (the rollout's token budget and decoding)."""
    session = progress.resolve(session)

    space = get_task_space(env_cfg.id)
    tasks = select_train_tasks(env_cfg, space, seed)
    rng = np.random.default_rng([seed, 7])
    order = rng.permutation(len(tasks))
    pick = order[: sft_cfg.num_tasks]
    trajs = oracle_trajectories(env_cfg.id, [tasks[int(i)] for i in pick], env_cfg.chat, env_cfg.env_kwargs,
                                seed=seed, executor=env_cfg.executor, slip_prob=sft_cfg.slip_prob,
                                search=sft_cfg.expert == "searching", dawdle_prob=sft_cfg.dawdle_prob,
                                filter_success=sft_cfg.filter_success, tags=sft_cfg.tags, session=session)

    full = ChatConfig.of(env_cfg.chat).history == "full"
    samples = sft_episode_samples(policy, trajs) if full else sft_samples(policy, trajs)
    if len(pick) and not samples:  # else the clone starts RL untrained, a "loss nan" line its only sign
        why = (f"the demonstrator reached the goal on none of the {len(pick)} training tasks it played (sft.filter_success "
               "keeps only those)" if sft_cfg.filter_success else
               f"the demonstrator's episodes on {len(pick)} training tasks gave no step to learn from")
        raise ConfigError(f"sft: nothing to imitate: {why}; give its episodes more turns, raise sft.num_tasks"
                          f"{', set sft.filter_success=false' if sft_cfg.filter_success else ''}, or set "
                          "sft.enabled=false to start RL from the model as it is")
    stats = train_sft(policy, samples, sft_cfg.epochs, sft_cfg.lr, sft_cfg.batch_size, seed=seed,
                      weight_decay=sft_cfg.weight_decay, max_steps=sft_cfg.max_steps, log=log, session=session,
                      matmul_dtype=sft_cfg.matmul_dtype, dtype_setting="sft.matmul_dtype")
    stats["trajectories"] = len(trajs)
    if sft_cfg.dagger.rounds:
        if full:
            raise ConfigError("sft.dagger relabels one prompt per step: use a windowed prompt (env.chat.history "
                              "a number), or set sft.dagger.rounds=0")
        if student_sampling is None:
            raise ValueError("run_sft with sft.dagger.rounds > 0 needs student_sampling (the rollout's decoding)")
        # the clone plays train tasks the demonstrations did not use, while there are any
        unused = [tasks[int(i)] for i in order[sft_cfg.num_tasks:]] or [tasks[int(i)] for i in pick]

        def train(everything: list[Sample]) -> dict:
            return train_sft(policy, everything, sft_cfg.dagger.epochs, sft_cfg.lr, sft_cfg.batch_size, seed=seed,
                             weight_decay=sft_cfg.weight_decay, log=log, session=session,
                             matmul_dtype=sft_cfg.matmul_dtype, dtype_setting="sft.matmul_dtype")

        stats["dagger"] = dagger_rounds(policy, sft_cfg.dagger, env_cfg, unused, samples, train, student_sampling,
                                        seed, log=log, session=session)
        stats["final_loss"] = stats["dagger"][-1]["final_loss"]
    return stats
