"""The learner: scoring sequences without gradients, and the clipped-policy update.

    score_sequences     one no-grad pass: per sequence its target logprobs and last hidden states
                        (value / progress heads, recomputed or proximal logprobs)
    ppo_update          epochs x minibatches x micro-batches of the clipped loss (trainers/ppo.py),
                        gradients accumulated per minibatch, one optimizer step each

Both run on a `TrainablePolicy` (agentgym.policies.engines) and take the config section they
use (`PPOConfig`), never the whole config. Data parallel enters through `dp`
(trainers/distributed.py): a rank's `samples` hold size-only ghosts for the other ranks'
samples, so permutations, denominators and optimizer steps are those of one process.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from agentgym import progress
from agentgym.errors import AgentGymError
from agentgym.trainers.ppo import ImportanceStats, reference_logprobs, token_logprobs
from agentgym.trainers.precision import update_autocast
from agentgym.trainers.samples import Sample, TokenSequence, collate, pad_sequences
from agentgym.trainers.shared_prefix import (SharedRoot, plan_micro_batches, shared_prefix_logprobs, shared_root_length,
                                             supports_shared_prefix, top_layers_only)


class TrainingDiverged(AgentGymError):
    """Non-finite advantages, loss or gradients: training stops, the last checkpoint is kept."""


def check_finite(name: str, value: Any, iteration: int) -> None:
    if isinstance(value, torch.Tensor):
        ok = bool(torch.isfinite(value).all())
    else:
        ok = bool(np.all(np.isfinite(np.asarray(value, dtype=np.float64))))
    if not ok:
        raise TrainingDiverged(f"iteration {iteration}: non-finite {name}; training stopped, the last checkpoint "
                               "is kept (lower ppo.lr or check the rewards)")


def micro_batches(items: Sequence, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


def token_micro_batches(items: Sequence, max_tokens: int) -> Iterator[list]:
    """`items` (longest first) cut so that each micro-batch's rows x longest row stays within
    `max_tokens`; a sample longer than that goes alone."""
    batch: list = []
    for item in items:
        if batch and len(batch[0]) * (len(batch) + 1) > max_tokens:
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


def cut_micro_batches(pc, items: Sequence) -> list[list]:
    """A minibatch's micro-batches (longest first): ppo.micro_batch_tokens when set, else
    ppo.micro_batch_size samples each."""
    ordered = by_length(items)
    if pc.micro_batch_tokens:
        return list(token_micro_batches(ordered, pc.micro_batch_tokens))
    return list(micro_batches(ordered, pc.micro_batch_size))


def by_length(items: Sequence) -> list:
    """Longest first: each micro-batch then holds sequences of similar length, so right padding
    adds little (a minibatch in random order carried 1.54x its real tokens); equal lengths in token
    order, so identical samples sit together (`_unique_forward`). The minibatch's gradient is the
    same sum, in another order."""
    return sorted(items, key=lambda s: (-len(s), s.input_ids))


def _unique_forward(model, batch: dict, micro: Sequence[Sample], where: torch.Tensor, want_hidden: bool,
                    want_entropy: bool, inputs_embeds: torch.Tensor | None = None) -> tuple:
    """token_logprobs of the micro-batch with identical samples computed once (a group whose
    episodes took the same action in the same state: 4% of the main job's samples at its first
    iteration, 19% at its last) and their rows copied back: the same values and gradient."""
    index: dict[tuple, int] = {}
    rows = [index.setdefault((tuple(s.input_ids), _allowed_key(s)), len(index)) for s in micro]
    allowed = batch.get("allowed")
    if len(index) == len(micro):
        return token_logprobs(model, batch["input_ids"], batch["attention_mask"], want_hidden, want_entropy=want_entropy,
                              positions=where, allowed=allowed, inputs_embeds=inputs_embeds)[:3 if want_entropy else 2]
    first = torch.tensor([rows.index(u) for u in range(len(index))], device=where.device)
    expand = torch.tensor(rows, device=where.device)
    # a position any copy trains on (copies can differ in mask: drop_abs_adv_below)
    wanted = torch.zeros((len(index), where.shape[1]), dtype=torch.bool, device=where.device)
    wanted = wanted.index_put((expand,), where, accumulate=True)
    out = token_logprobs(model, batch["input_ids"][first], batch["attention_mask"][first], want_hidden,
                         want_entropy=want_entropy, positions=wanted,
                         allowed=allowed[first] if allowed is not None else None,
                         inputs_embeds=inputs_embeds[first] if inputs_embeds is not None else None)
    logp = out[0][expand] * where
    hidden = out[1][expand] if out[1] is not None else None
    return (logp, hidden, out[2][expand] * where) if want_entropy else (logp, hidden)


def _padded_states(states: list[torch.Tensor], batch: dict) -> torch.Tensor:
    """[B, T, H]: a right-padded micro-batch's frozen-layer outputs (its last token and pads: 0, no loss
    reads what follows them)."""
    ids = batch["input_ids"]
    out = states[0].new_zeros((ids.shape[0], ids.shape[1], states[0].shape[-1]))
    for b, own in enumerate(states):
        out[b, :len(own)] = own
    return out.to(ids.device)


def _allowed_key(sample: TokenSequence) -> tuple:
    """What else than its ids makes a sample's logprobs: the ids each token was drawn among."""
    return tuple(sorted((p, tuple(ids)) for p, ids in sample.allowed.items())) if sample.allowed else ()


def equal_minibatches(order: np.ndarray, max_size: int) -> list[np.ndarray]:
    """`order` cut into ceil(n / max_size) minibatches whose sizes differ by at most one. Slicing
    by max_size would leave a small remainder (26 of 282 samples) that still gets a full optimizer
    step: its gradient is noisier and, under token-mean, weighs as much as a full minibatch's."""
    if len(order) == 0:
        return []
    return np.array_split(order, math.ceil(len(order) / max_size))


@torch.no_grad()
def score_sequences(policy, sequences: Sequence[TokenSequence], micro: int, want_hidden: bool) -> list:
    """One no-grad pass: per sequence (target logprobs [len-1], last hidden states [len, H] or None)."""
    model = policy.model
    was_training = model.training
    model.eval()
    out = []
    try:
        for chunk in micro_batches(sequences, micro):
            batch = pad_sequences(chunk, policy.tokenizer.pad_token_id, device=policy.device)
            logp, hidden = token_logprobs(model, batch["input_ids"], batch["attention_mask"], want_hidden,
                                          positions=_loss_positions(chunk, batch["input_ids"].shape[1]),
                                          allowed=batch.get("allowed"))
            for b, s in enumerate(chunk):
                out.append((logp[b, : len(s) - 1].float().cpu(), None if hidden is None else hidden[b, : len(s)].float()))
    finally:
        model.train(was_training)
    return out


def _loss_positions(sequences: Sequence[TokenSequence], width: int) -> torch.Tensor:
    """[B, width-1]: where a sequence's tokens are the model's (the only logprobs anyone reads)."""
    out = torch.zeros((len(sequences), width - 1), dtype=torch.bool)
    for b, s in enumerate(sequences):
        out[b, : len(s) - 1] = torch.tensor(s.loss_mask[1:], dtype=torch.bool)
    return out


def _value_loss(value_head, hidden, micro: list[Sample], n_values: int):
    preds, targets = [], []
    for b, s in enumerate(micro):
        if s.value_targets:
            preds.append(value_head(hidden[b, s.value_positions]))
            targets.extend(s.value_targets)
    if not preds:
        return None
    v = torch.cat(preds)
    t = torch.tensor(targets, dtype=v.dtype, device=v.device)
    return ((v - t) ** 2).sum() / n_values


def ppo_update(pc, clip: tuple[float, float], policy, optimizer, scheduler, samples: list[Sample],
               rng: np.random.Generator, iteration: int, value_head=None, is_cap: float | None = None,
               dp=None, estimator=None, session=progress.CURRENT, mismatch=None) -> dict:
    """pc: the run's PPOConfig; clip: (lo, hi) of the ratio (trainers.ppo.clip_range); is_cap: the
    off-policy truncation (None: plain PPO-clip); dp: the data-parallel context (None: one process);
    estimator: the run's EstimatorConfig, whose declared policy loss, aggregation, clip range and
    dynamic sampling the update uses (trainers/policy_losses.py; None: PPO-clip as configured);
    mismatch: a RolloutCorrectionConfig to measure the rollout-trainer mismatch with, on the first
    optimizer step's tokens, whose logprobs are the trainer's before any weight moves, against the
    samples' old_logprobs (the engine's); out["mismatch"] holds its metrics (rollout_correction.correct)."""
    if dp is None:
        from agentgym.trainers.distributed import DataParallel

        dp = DataParallel()
    from agentgym.trainers.policy_losses import update_loss

    spec_loss = update_loss(estimator, pc, clip)
    lo, hi = spec_loss.clip
    if spec_loss.dynamic_sampling and not dp.enabled:
        # DAPO: a group with all-equal outcomes has all-zero advantages; its samples would only dilute
        # the token-level mean. (Under data parallelism other ranks' samples are ghosts: kept.)
        samples = [s for s in samples if any(a != 0.0 for a in s.advantages)]
    longest = max((s.num_loss_tokens for s in samples), default=1)
    off_policy = {} if is_cap is None else {"is_cap": is_cap}
    model = policy.model
    model.train()
    params = policy.trainable_parameters() + (list(value_head.parameters()) if value_head is not None else [])
    use_kl = pc.kl_coef > 0
    totals: dict[str, float] = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "approx_kl": 0.0,
                                "value_loss": 0.0, "grad_norm": 0.0}
    ratio_max, n_updates, n_micro = 0.0, 0, 0
    minibatch_ratio_max: list[float] = []  # per optimizer step: the first one's is 1 up to float error
    weights = ImportanceStats()  # no stats when synchronous
    # FSDP pairs every forward over ranks, and a level-wise pass is three: sharded runs keep the plain one
    share = pc.share_prefixes and not dp.sharded and supports_shared_prefix(model)
    # a root shared by a whole minibatch is computed once before its micro-batches and its gradient
    # sent back after them (SharedRoot); one process only (DDP's reducer fires on each backward) and
    # without a value head (it would read the root's hidden states, which are detached)
    share_root = share and not dp.enabled and value_head is None
    # the rollout's frozen-layer outputs (LoRA on the top layers, HF engine, one process, no value head:
    # a value may read a sample's last position, whose state the rollout never computed)
    frozen = getattr(policy, "frozen_states", None) if pc.reuse_frozen_states and not dp.enabled \
        and value_head is None and supports_shared_prefix(model) else None
    frozen_samples = 0
    update_autocast(pc.matmul_dtype, policy.device)  # refuses bf16 without native bf16 matmuls, before any work
    precision = functools.partial(update_autocast, pc.matmul_dtype, policy.device)  # a fresh context per pass

    def cut(items: list) -> list:
        """(micro-batch, level plan or None) pairs of a minibatch's local samples."""
        if share:
            root = shared_root_length(items) if share_root else 0
            return plan_micro_batches(items, pc.micro_batch_size, lambda xs: cut_micro_batches(pc, xs), root)
        return [(m, None) for m in cut_micro_batches(pc, items)]

    # every optimizer step's micro-batches, cut before the loop so the progress bar knows their count
    # (the permutations are drawn in the order the loop used to draw them)
    minibatches = [[samples[j] for j in chunk] for _ in range(pc.epochs)
                   for chunk in equal_minibatches(rng.permutation(len(samples)), pc.minibatch_size)]
    steps = [(minibatch, cut(dp.local(minibatch))) for minibatch in minibatches]
    micro_total = None if dp.enabled else sum(len(micros) for _, micros in steps)  # ranks see ghosts: counts vary
    prefix_tokens = [0, 0]  # tokens computed by the shared-prefix passes, and what a plain pass computes
    measured: list[tuple[np.ndarray, np.ndarray]] = []  # first step's loss tokens: (trainer, engine) logprobs per row
    with progress.bar("update", total=micro_total, unit="micro-batches", every=15.0, session=session) as bar:
        for minibatch, micros in steps:  # the minibatch with other ranks' ghosts: one process's denominators
            step_ratio_max = 0.0
            denom = spec_loss.denominator(minibatch, longest)
            n_values = sum(len(s.value_targets) for s in minibatch)
            optimizer.zero_grad(set_to_none=True)
            dp.keep_step(policy, len(micros), pc.entropy_coef > 0, use_kl)  # FSDP: passes pair up over ranks
            root = None
            first_plan = micros[0][1] if micros else None  # every micro-batch's plan has the same root
            # the frozen layers' outputs from the rollout (policies/frozen_states.py): with LoRA on the top
            # layers, the passes run the adapted layers alone; a minibatch uses them when all its samples have them
            found = frozen.for_sequences([s for m, _ in micros for s in m]) if frozen is not None else None
            states = None if found is None else iter(found)  # in the micro-batches' order
            frozen_samples += 0 if found is None else len(found)
            if first_plan is not None and first_plan.root:
                with precision(), top_layers_only(model, frozen.layer) if found else contextlib.nullcontext():
                    root = SharedRoot(model, first_plan.levels[0].rows[0], policy.tokenizer.pad_token_id, policy.device,
                                      states=None if found is None else found[0][:first_plan.root])
                prefix_tokens[0] += first_plan.root
            for micro, plan in micros:
                batch = collate(micro, policy.tokenizer.pad_token_id, device=policy.device)
                entropy = None
                where = batch["loss_mask"] > 0
                with precision():  # ppo.matmul_dtype: the backward follows the forward's dtypes
                    if plan is not None:
                        mine = None if states is None else [next(states) for _ in micro]
                        with top_layers_only(model, frozen.layer) if mine is not None else contextlib.nullcontext():
                            logp, hidden, *rest = shared_prefix_logprobs(
                                model, micro, policy.tokenizer.pad_token_id, where, value_head is not None,
                                want_entropy=pc.entropy_coef > 0, plan=plan, allowed=batch.get("allowed"), root=root,
                                states=mine)
                        entropy = rest[0] if rest else None
                        prefix_tokens[0] += plan.tokens()
                        prefix_tokens[1] += sum(len(s) for s in micro)
                    else:
                        mine = None if states is None else _padded_states([next(states) for _ in micro], batch)
                        with top_layers_only(model, frozen.layer) if mine is not None else contextlib.nullcontext():
                            logp, hidden, *rest = _unique_forward(model, batch, micro, where, value_head is not None,
                                                                  pc.entropy_coef > 0, mine)
                        entropy = rest[0] if rest else None
                    ref_logp = reference_logprobs(policy, batch["input_ids"], batch["attention_mask"]) if use_kl else None
                    loss, st = spec_loss.fn(logp, batch["old_logprobs"], batch["advantages"], batch["loss_mask"], lo, hi,
                                            spec_loss.how, max(denom, 1.0), ref_logp, pc.kl_coef, entropy, pc.entropy_coef,
                                            prox_logp=batch.get("prox_logprobs"), **off_policy)
                    weights.add(st)
                    if mismatch is not None and n_updates == 0:  # no step taken yet: logp is pi_old
                        on = where.cpu()
                        trainer, engine = logp.detach().float().cpu(), batch["old_logprobs"].float().cpu()
                        measured += [(trainer[b][on[b]].numpy(), engine[b][on[b]].numpy()) for b in range(len(micro))]
                    if value_head is not None and n_values:
                        v_loss = _value_loss(value_head, hidden, micro, n_values)
                        if v_loss is not None:
                            loss = loss + pc.value_coef * v_loss
                            totals["value_loss"] += float(v_loss.detach())
                check_finite("loss", loss.detach(), iteration)
                loss.backward()
                for key in ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl"):
                    totals[key] += getattr(st, key)
                step_ratio_max = max(step_ratio_max, st.ratio_max)
                n_micro += 1
                bar.update(advance=1)
            if root is not None:
                root.backward()  # the root's summed gradient, once, before the step
            ratio_max = max(ratio_max, step_ratio_max)
            minibatch_ratio_max.append(step_ratio_max)
            dp.sync_gradients(params)
            grad_norm = dp.clip_grad_norm(params, pc.max_grad_norm)
            check_finite("gradient norm", grad_norm, iteration)
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
    if measured:
        from agentgym.trainers.rollout_correction import correct

        out["mismatch"] = correct(mismatch, [np.ones(len(t)) for t, _ in measured], [t for t, _ in measured],
                                  [e for _, e in measured]).metrics
    if prefix_tokens[1]:
        out["shared_prefix_token_ratio"] = prefix_tokens[0] / prefix_tokens[1]
    if frozen is not None:
        out["frozen_states_samples"] = frozen_samples  # samples whose frozen layers the rollout's outputs replaced
    out.update(weights.summary())
    return out
