"""Token-level PPO-clip loss, KL to a reference, and a value head for the `ppo` estimator.

    ratio_k = exp(logp_k - logp_old_k)                     for every model token k
    L_clip  = -min(ratio_k A_k, clip(ratio_k, lo, hi) A_k)  lo, hi = 1-eps, 1+eps
                                                          (LOOP: 1/(1+eps), 1+eps)
    L_kl    = exp(ref_k - logp_k) - (ref_k - logp_k) - 1   (the k3 estimator, >= 0)
    L       = L_clip + kl_coef L_kl - entropy_coef H_k      H_k = entropy of pi(. | prefix_k)

aggregated as a mean over the minibatch's model tokens ("token-mean", verl's default) or a
mean over sequences of per-sequence token means ("seq-mean"). Env tokens have mask 0.

Off-policy correction (asynchronous rollouts, trainers/async_rollout.py), mu = the behaviour
policy whose logprobs were recorded at generation, prox = the weights at update start:

    truncated IS (is_cap = C):  w_k = exp(logp_k - mu_k)
                                L = -min(min(w_k, C) A_k, clip(w_k, lo, hi) A_k)
        the ratio is against the behaviour policy; C bounds the weight of a negative-advantage
        token whose probability rose since it was sampled (the dual clip).
    decoupled (prox_logp given): w_k = exp(prox_k - mu_k) (no gradient), r_k = exp(logp_k - prox_k)
                                L = -min(w_k, C) * min(r_k A_k, clip(r_k, lo, hi) A_k)
        the trust region is centred on the current weights and the staleness is corrected by the
        behaviour weight alone (Hilton et al. 2021; AReaL's decoupled PPO).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentgym.errors import ConfigError
from agentgym.trainers.last_layer import final_hidden_at


def clip_range(eps: float, asymmetric: bool) -> tuple[float, float]:
    return (1.0 / (1.0 + eps), 1.0 + eps) if asymmetric else (1.0 - eps, 1.0 + eps)


def within_allowed(logp_rows: torch.Tensor, targets: torch.Tensor, ids: torch.Tensor):
    """Per row: the target's logprob and the entropy under the distribution `logp_rows` (log-softmax
    rows [K, V]) renormalized over the row's `ids` ([K, M], -1 padded): admissible-only decoding's
    policy, as the sampler drew from it."""
    real = ids >= 0
    kept = logp_rows.gather(-1, ids.clamp(min=0)).masked_fill(~real, float("-inf"))
    log_z = torch.logsumexp(kept, dim=-1)
    renormed = (kept - log_z[:, None]).masked_fill(~real, 0.0)
    entropy = -(renormed.exp() * renormed).masked_fill(~real, 0.0).sum(-1)
    return logp_rows.gather(-1, targets[:, None])[:, 0] - log_z, entropy


def _renormalize(logp: torch.Tensor, entropy: torch.Tensor | None, logp_rows: torch.Tensor, targets: torch.Tensor,
                 ids: torch.Tensor) -> tuple:
    """`logp` / `entropy` (one value per row) with the rows that have allowed ids renormalized over them."""
    limited = (ids >= 0).any(-1)
    if not bool(limited.any()):
        return logp, entropy
    lp, ent = within_allowed(logp_rows[limited], targets[limited], ids[limited])
    logp = logp.masked_scatter(limited, lp)
    if entropy is not None:
        entropy = entropy.masked_scatter(limited, ent)
    return logp, entropy


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, want_hidden: bool = False,
                   want_entropy: bool = False, positions: torch.Tensor | None = None,
                   allowed: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None):
    """logprobs[b, p-1] = log pi(input_ids[b, p] | input_ids[b, :p]); optionally last hidden states,
    and with want_entropy a third value: the entropy of pi(. | input_ids[b, :p]) at the same places.

    positions: optional [B, T-1] mask of the places wanted (the loss tokens). The LM head and the
    log-softmax then run on those rows alone, zeros elsewhere: in an agent's update most tokens
    are prompt and observation (95% in the main job), whose vocabulary-wide logits are not needed.
    allowed: optional [B, T-1, M] ids (-1 padded, `pad_sequences`): where a row has any, pi is
    renormalized over them (admissible-only decoding's policy). inputs_embeds: [B, T, H] the model runs
    from instead of the ids (the frozen layers' outputs, under `shared_prefix.top_layers_only`)."""
    # the masks are built on the CPU; on a GPU they must be where the ids are (a no-op on a CPU)
    positions = None if positions is None else positions.to(input_ids.device)
    allowed = None if allowed is None else allowed.to(input_ids.device)
    if positions is None or not head_is_linear(model):
        out = model(input_ids=None if inputs_embeds is not None else input_ids, inputs_embeds=inputs_embeds,
                    attention_mask=attention_mask, output_hidden_states=want_hidden,
                    use_cache=False)
        all_logp = torch.log_softmax(out.logits[:, :-1, :].float(), dim=-1)
        logp = all_logp.gather(-1, input_ids[:, 1:, None])[..., 0]
        hidden = out.hidden_states[-1] if want_hidden else None
        entropy = -(all_logp.exp() * all_logp).sum(-1) if want_entropy else None
        if allowed is not None:
            shape = logp.shape
            flat_logp, flat_entropy = _renormalize(logp.reshape(-1), None if entropy is None else entropy.reshape(-1),
                                                   all_logp.reshape(-1, all_logp.shape[-1]),
                                                   input_ids[:, 1:].reshape(-1), allowed.reshape(-1, allowed.shape[-1]))
            logp = flat_logp.reshape(shape)
            entropy = None if flat_entropy is None else flat_entropy.reshape(shape)
        if want_entropy:
            return logp, hidden, entropy
        return logp, hidden
    where = positions.bool()
    hidden = None
    # the last layer at the loss positions alone when the model allows (trainers/last_layer.py)
    chosen = None if want_hidden else final_hidden_at(model, input_ids, attention_mask,
                                                      torch.nn.functional.pad(where, (0, 1)), inputs_embeds)
    if chosen is None:
        out = model(input_ids=None if inputs_embeds is not None else input_ids, inputs_embeds=inputs_embeds,
                    attention_mask=attention_mask, output_hidden_states=True, use_cache=False,
                    logits_to_keep=1)
        hidden = out.hidden_states[-1]  # after the final norm: what the LM head reads
        chosen = hidden[:, :-1][where]
    picked = head_logprobs(model, chosen)
    targets = input_ids[:, 1:][where]
    row_logp = picked.gather(-1, targets[:, None])[:, 0]
    row_entropy = -(picked.exp() * picked).sum(-1) if want_entropy else None
    if allowed is not None:
        row_logp, row_entropy = _renormalize(row_logp, row_entropy, picked, targets, allowed[where])
    logp = torch.zeros(where.shape, dtype=picked.dtype, device=picked.device)
    logp = logp.index_put((where.nonzero(as_tuple=True)), row_logp)
    if want_entropy:
        entropy = torch.zeros(where.shape, dtype=picked.dtype, device=picked.device)
        entropy = entropy.index_put((where.nonzero(as_tuple=True)), row_entropy)
        return logp, hidden if want_hidden else None, entropy
    return logp, hidden if want_hidden else None


def head_logprobs(model, hidden: torch.Tensor) -> torch.Tensor:
    """log_softmax of the LM head at `hidden` [N, H], the head in the weights' own dtype even under
    bf16 autocast (ppo.matmul_dtype=bf16): bf16 keeps 8 significant bits, so logits near 20 would
    be rounded to 1/8 and the first ratio would drift from 1. At the loss positions alone it costs
    little (2% of the update's positions in a household job)."""
    head = model.get_output_embeddings()
    with torch.autocast(hidden.device.type, enabled=False):
        return torch.log_softmax(head(hidden.to(head.weight.dtype)).float(), dim=-1)


def head_is_linear(model) -> bool:
    """Whether logits are exactly the output embedding of the last hidden state (no soft-capping or
    scaling after it), so the head can be applied to chosen positions only."""
    config = getattr(model, "config", None)
    if config is None or not callable(getattr(model, "get_output_embeddings", None)):
        return False
    return not any(getattr(config, name, None) for name in ("final_logit_softcapping", "logit_scale",
                                                           "logits_scaling", "output_multiplier_scale"))


def reference_logprobs(policy, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """token_logprobs under the policy's frozen reference (the base model with the LoRA adapter
    off, or policy.reference=copy), without gradients: the KL term's anchor."""
    return token_logprobs(policy.reference_forward, input_ids, attention_mask)[0]


AGGREGATIONS = ("token-mean", "seq-mean", "token-sum")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: str, denom: float | None = None) -> torch.Tensor:
    """token-mean: sum / number of model tokens (DAPO's token-level loss); seq-mean: mean over rows of
    each row's token mean (GRPO's and GSPO's 1/G sum_i 1/|y_i| sum_t); token-sum: sum / a constant
    that does not depend on the lengths (Dr. GRPO). `denom` replaces the per-call normalizer: the
    whole minibatch's under gradient accumulation, so that micro-batches add up to its mean."""
    if how == "token-mean":
        return (per_token * mask).sum() / (denom if denom is not None else mask.sum().clamp(min=1.0))
    if how == "seq-mean":
        per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.sum() / (denom if denom is not None else max(per_token.shape[0], 1))
    if how == "token-sum":
        return (per_token * mask).sum() / (denom if denom is not None else max(per_token.numel(), 1))
    raise ConfigError(f"unknown loss aggregation {how!r}: use one of {', '.join(AGGREGATIONS)}")


@dataclass
class LossStats:
    pg_loss: float
    kl: float
    clip_frac: float
    approx_kl: float  # E[logp_old - logp]: how far the update moved from the behaviour policy
    ratio_max: float
    entropy: float = 0.0  # mean token entropy of the responses (only computed with an entropy bonus)
    # importance weights of the off-policy correction (0 tokens when there was none)
    is_sum: float = 0.0
    is_tokens: float = 0.0
    is_max: float = 0.0
    is_truncated: float = 0.0  # tokens whose weight exceeded the cap


def importance_weights(logp: torch.Tensor, behaviour_logp: torch.Tensor, cap: float | None = None):
    """Per-token w = exp(logp - behaviour_logp), its truncation min(w, cap) and where w > cap."""
    w = torch.exp(logp - behaviour_logp)
    if cap is None:
        return w, w, torch.zeros_like(w, dtype=torch.bool)
    return w, torch.clamp(w, max=cap), w > cap


def _weight_stats(w: torch.Tensor, truncated: torch.Tensor, mask: torch.Tensor) -> dict:
    with torch.no_grad():
        w = w.detach()
        return {"is_sum": float((w * mask).sum()), "is_tokens": float(mask.sum()),
                "is_max": float((w * mask).max()) if mask.any() else 0.0,
                "is_truncated": float((truncated.float() * mask).sum())}


def ppo_clip_loss(logp, old_logp, adv, mask, clip_lo, clip_hi, how="token-mean", denom=None,
                  ref_logp=None, kl_coef: float = 0.0, entropy=None, entropy_coef: float = 0.0,
                  is_cap: float | None = None, prox_logp=None):
    """old_logp: the behaviour logprobs. Without is_cap and prox_logp, plain PPO-clip (the
    synchronous loop, unchanged); with them, the off-policy forms of the module docstring."""
    weights = {}
    if prox_logp is None:
        log_ratio = (logp - old_logp) * mask
        ratio = torch.exp(log_ratio)
        unclipped = ratio * adv
        if is_cap is not None:
            _, truncated_w, over = importance_weights(logp * mask, old_logp * mask, is_cap)
            unclipped = truncated_w * adv
            weights = _weight_stats(ratio, over, mask)
        clipped = torch.clamp(ratio, clip_lo, clip_hi) * adv
        pg = -torch.minimum(unclipped, clipped)
    else:
        log_ratio = (logp - prox_logp) * mask
        ratio = torch.exp(log_ratio)
        behaviour_w, truncated_w, over = importance_weights(prox_logp * mask, old_logp * mask, is_cap)
        pg = -truncated_w.detach() * torch.minimum(ratio * adv, torch.clamp(ratio, clip_lo, clip_hi) * adv)
        weights = _weight_stats(behaviour_w, over, mask)
    return finish_loss(pg, logp, log_ratio, ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef, entropy,
                       entropy_coef, weights)


def finish_loss(pg, logp, log_ratio, ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef, entropy,
                entropy_coef, weights: dict | None = None) -> tuple[torch.Tensor, LossStats]:
    """The tail every policy loss shares: the per-token loss `pg` aggregated, plus the KL penalty
    to the reference and minus the entropy bonus, and the stats of the update (clip fraction,
    approximate KL from `log_ratio`, the largest ratio, the importance `weights` when any)."""
    loss = aggregate(pg, mask, how, denom)
    kl_value = torch.zeros(())
    if ref_logp is not None and kl_coef > 0:
        d = (ref_logp - logp) * mask
        kl_tok = torch.exp(d) - d - 1.0
        kl_value = aggregate(kl_tok, mask, how, denom)
        loss = loss + kl_coef * kl_value
    entropy_value = torch.zeros(())
    if entropy is not None and entropy_coef > 0:
        entropy_value = aggregate(entropy, mask, how, denom)
        loss = loss - entropy_coef * entropy_value  # a bonus: sharper-than-needed policies pay
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        clip_frac = (((ratio < clip_lo) | (ratio > clip_hi)).float() * mask).sum() / n
        approx_kl = (-log_ratio * mask).sum() / n
        ratio_max = (ratio * mask).max() if mask.any() else torch.ones(())
    stats = LossStats(float(aggregate(pg.detach(), mask, how, denom)), float(kl_value.detach()), float(clip_frac),
                      float(approx_kl), float(ratio_max), float(entropy_value.detach()), **(weights or {}))
    return loss, stats


class ImportanceStats:
    """Accumulates the importance weights of an update: mean, max, fraction truncated."""

    def __init__(self):
        self.total = self.tokens = self.max = self.truncated = 0.0

    def add(self, st: LossStats) -> None:
        self.total += st.is_sum
        self.tokens += st.is_tokens
        self.truncated += st.is_truncated
        self.max = max(self.max, st.is_max)

    def summary(self) -> dict:
        if not self.tokens:
            return {}
        return {"is_weight_mean": self.total / self.tokens, "is_weight_max": self.max,
                "is_truncated_frac": self.truncated / self.tokens}


from agentgym.trainers.heads import ValueHead  # noqa: E402,F401  (old import path; the heads live in heads.py)
