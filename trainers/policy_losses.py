"""Policy-loss variants as pure functions with one signature, and their registry.

Every loss takes what `trainers.ppo.ppo_clip_loss` takes and returns what it returns:

    loss, stats = POLICY_LOSSES[name](logp, old_logp, adv, mask, clip_lo, clip_hi, how, denom,
                                      ref_logp, kl_coef, entropy, entropy_coef, is_cap=None, prox_logp=None)

logp / old_logp / adv / mask: [rows, tokens] (one row per sample; mask 1 on the model's tokens);
[clip_lo, clip_hi]: the clip range (`clip_bounds`); how: "token-mean" | "seq-mean" | "token-sum";
denom: the minibatch normalizer under gradient accumulation (`loss_denominator`). The KL to the
reference (k3) and the entropy bonus are added the same way as in ppo_clip_loss, except where a
method says otherwise (REINFORCE++ folds its KL into the advantage).

Notation below: r_t = pi(t) / pi_old(t) per token, A the advantage, sg = stop-gradient.

| name         | per-token term                                                | paper |
| ------------ | ------------------------------------------------------------- | ----- |
| ppo          | -min(r A, clip(r, 1-e, 1+e) A)  (trainers/ppo.py, unchanged)    | Schulman et al. 2017 |
| dapo         | the same with e_low = 0.2, e_high = 0.28 ("clip-higher")      | Yu et al. 2025, DAPO eq. 8-10 |
| dr_grpo      | the same, summed over tokens / a constant (no 1/|o_i|)         | Liu et al. 2025, "Understanding R1-Zero-like Training" |
| gspo         | -min(s_i A, clip(s_i) A), s_i = exp(mean_t log r_t) per row    | Zheng et al. 2025, GSPO eq. 5-7 |
| reinforce_pp | ppo with A_t - beta * sum_{k>=t} (log pi_old - log pi_ref)_k   | Hu 2025, REINFORCE++ |
| cispo        | -sg(clip(r, 1-e_low, 1+e_high)) A log pi(t)                     | MiniMax 2025, MiniMax-M1 eq. 4-5 |

The asynchronous-rollout corrections (is_cap, prox_logp) exist for `ppo` only; the others refuse
them in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from agentgym.errors import ConfigError
from agentgym.trainers.ppo import AGGREGATIONS, LossStats, aggregate, clip_range, finish_loss, ppo_clip_loss
from agentgym.trainers.estimators import estimator_spec
from agentgym.trainers.estimators.options import resolve_options


PolicyLoss = Callable[..., tuple[torch.Tensor, LossStats]]


def loss_denominator(how: str, num_tokens: float, num_samples: int, norm_tokens: int) -> float:
    """The normalizer of one minibatch: its model-token count (token-mean), its number of samples
    (seq-mean), or samples x `norm_tokens` (token-sum; Dr. GRPO's constant, e.g. the generation budget)."""
    if how == "token-mean":
        return max(float(num_tokens), 1.0)
    if how == "seq-mean":
        return max(float(num_samples), 1.0)
    if how == "token-sum":
        return max(float(num_samples) * max(norm_tokens, 1), 1.0)
    raise ConfigError(f"unknown loss aggregation {how!r}: use one of {', '.join(AGGREGATIONS)}")


def clip_bounds(options: dict, clip_eps: float, asymmetric: bool) -> tuple[float, float]:
    """[1 - clip_low, 1 + clip_high] when the method declares them (DAPO, GSPO, CISPO), else ppo's range."""
    if "clip_low" in options or "clip_high" in options:
        low, high = options.get("clip_low", clip_eps), options.get("clip_high", clip_eps)
        return max(1.0 - low, 0.0), 1.0 + high
    return clip_range(clip_eps, asymmetric)


def _refuse_off_policy(name: str, is_cap, prox_logp) -> None:
    if is_cap is not None or prox_logp is not None:
        raise ConfigError(f"policy loss {name!r} has no off-policy correction: use rollout.max_staleness=0 "
                          "(or an estimator whose loss is ppo)")


def _finish(pg, logp, old_logp, ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef, entropy,
            entropy_coef) -> tuple[torch.Tensor, LossStats]:
    """pg per token -> the aggregated loss with ppo_clip_loss's KL and entropy terms, and its stats."""
    return finish_loss(pg, logp, logp - old_logp, ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef,
                       entropy, entropy_coef)


def clipped_surrogate(logp, old_logp, adv, mask, clip_lo, clip_hi, how="token-mean", denom=None, ref_logp=None,
                      kl_coef: float = 0.0, entropy=None, entropy_coef: float = 0.0, is_cap=None, prox_logp=None):
    """PPO's clipped surrogate -min(r A, clip(r, lo, hi) A) with any aggregation: DAPO (clip-higher
    through [lo, hi], token-mean) and Dr. GRPO (token-sum) are this loss with their declared options."""
    _refuse_off_policy("clipped surrogate", is_cap, prox_logp)
    ratio = torch.exp((logp - old_logp) * mask)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, clip_lo, clip_hi) * adv)
    return _finish(pg, logp, old_logp, ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef, entropy,
                   entropy_coef)


def gspo_loss(logp, old_logp, adv, mask, clip_lo, clip_hi, how="seq-mean", denom=None, ref_logp=None,
              kl_coef: float = 0.0, entropy=None, entropy_coef: float = 0.0, is_cap=None, prox_logp=None):
    """GSPO: one importance ratio per sequence (row), the geometric mean of its token ratios,

        s_i = exp(1/|y_i| sum_t log r_t),   L_i = -min(s_i A_i, clip(s_i, lo, hi) A_i),

    written in the paper's GSPO-token form s_{i,t} = sg(s_i) pi(t) / sg(pi(t)): the same value and,
    when A is constant over the row, the same gradient as the sequence form; a row whose advantage
    varies by token (full-conversation samples) keeps each token's own A. Averaged per row (seq-mean)."""
    _refuse_off_policy("gspo", is_cap, prox_logp)
    tokens = mask.sum(-1).clamp(min=1.0)
    log_s = ((logp - old_logp) * mask).sum(-1) / tokens  # [rows]
    s_token = torch.exp(log_s.detach()[:, None] + logp - logp.detach())  # value s_i, gradient s_i grad log pi(t)
    pg = -torch.minimum(s_token * adv, torch.clamp(s_token, clip_lo, clip_hi) * adv)
    seq_ratio = torch.exp(log_s.detach())[:, None].expand_as(mask)
    return _finish(pg, logp, old_logp, seq_ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef, entropy,
                   entropy_coef)


def reverse_cumsum(x: torch.Tensor) -> torch.Tensor:
    """y_t = sum_{k >= t} x_k along the last axis."""
    return torch.flip(torch.cumsum(torch.flip(x, [-1]), -1), [-1])


def reinforce_pp_loss(logp, old_logp, adv, mask, clip_lo, clip_hi, how="token-mean", denom=None, ref_logp=None,
                      kl_coef: float = 0.0, entropy=None, entropy_coef: float = 0.0, is_cap=None, prox_logp=None):
    """REINFORCE++: the KL to the reference is a per-token reward, -beta (log pi_old - log pi_ref)_k,
    so token t's advantage gains the KL rewards of the tokens after it in its row:

        A'_t = A_t - beta * sum_{k >= t} mask_k (log pi_old_k - log pi_ref_k)

    then PPO's clipped surrogate with A'. No separate KL loss term. (The estimator normalizes the
    returns over the whole batch before this fold; the paper folds first and normalizes after.)"""
    _refuse_off_policy("reinforce_pp", is_cap, prox_logp)
    if ref_logp is not None and kl_coef > 0:
        kl_reward = -kl_coef * ((old_logp - ref_logp) * mask).detach()
        adv = adv + reverse_cumsum(kl_reward) * mask
    ratio = torch.exp((logp - old_logp) * mask)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, clip_lo, clip_hi) * adv)
    return _finish(pg, logp, old_logp, ratio, mask, clip_lo, clip_hi, how, denom, None, 0.0, entropy, entropy_coef)


def cispo_loss(logp, old_logp, adv, mask, clip_lo, clip_hi, how="token-mean", denom=None, ref_logp=None,
               kl_coef: float = 0.0, entropy=None, entropy_coef: float = 0.0, is_cap=None, prox_logp=None):
    """CISPO: clip the importance-sampling weight and keep every token's gradient,

        L_t = -sg(clip(r_t, lo, hi)) * A_t * log pi(t),

    so a token whose ratio left the range still learns (PPO would drop its gradient); token-mean."""
    _refuse_off_policy("cispo", is_cap, prox_logp)
    ratio = torch.exp((logp - old_logp) * mask)
    weight = torch.clamp(ratio, clip_lo, clip_hi).detach()
    pg = -weight * adv * logp
    return _finish(pg, logp, old_logp, ratio, mask, clip_lo, clip_hi, how, denom, ref_logp, kl_coef, entropy,
                   entropy_coef)


POLICY_LOSSES: dict[str, PolicyLoss] = {
    "ppo": ppo_clip_loss,
    "dapo": clipped_surrogate,
    "dr_grpo": clipped_surrogate,
    "gspo": gspo_loss,
    "reinforce_pp": reinforce_pp_loss,
    "cispo": cispo_loss,
}


def policy_loss(name: str) -> PolicyLoss:
    if name not in POLICY_LOSSES:
        raise ConfigError(f"unknown policy loss {name!r}: choose one of {', '.join(sorted(POLICY_LOSSES))}")
    return POLICY_LOSSES[name]


def register_policy_loss(name: str, fn: PolicyLoss, overwrite: bool = False) -> PolicyLoss:
    if name in POLICY_LOSSES and POLICY_LOSSES[name] is not fn and not overwrite:
        raise ConfigError(f"a policy loss named {name!r} is already registered: pick another name")
    POLICY_LOSSES[name] = fn
    return fn


@dataclass(frozen=True)
class UpdateLoss:
    """What the update needs to know about the estimator's loss (learner.ppo_update)."""

    fn: PolicyLoss
    how: str  # aggregation
    clip: tuple[float, float]
    norm_tokens: int  # token-sum's per-sample constant; 0: the longest sample of the update
    dynamic_sampling: bool

    def denominator(self, minibatch: list, fallback_tokens: int) -> float:
        tokens = sum(s.num_loss_tokens for s in minibatch)
        return loss_denominator(self.how, tokens, len(minibatch), self.norm_tokens or fallback_tokens)


def update_loss(estimator: Any, ppo: Any, clip: tuple[float, float]) -> UpdateLoss:
    """The loss the estimator declares (EstimatorSpec.policy_loss, loss_agg, options), or PPO's with the
    run's ppo.loss_agg and `clip` when `estimator` is None. A method that declares its clip range
    (DAPO, GSPO, CISPO) replaces `clip` with [1 - clip_low, 1 + clip_high]."""
    if estimator is None:
        return UpdateLoss(ppo_clip_loss, ppo.loss_agg, clip, 0, False)

    spec = estimator_spec(estimator.name)
    options = resolve_options(spec, getattr(estimator, "options", None))
    if "clip_low" in options or "clip_high" in options:
        clip = clip_bounds(options, ppo.clip_eps, False)
    how = spec.loss_agg or ppo.loss_agg
    if how not in AGGREGATIONS:
        raise ConfigError(f"unknown loss aggregation {how!r}: use one of {', '.join(AGGREGATIONS)}")
    return UpdateLoss(policy_loss(spec.policy_loss), how, clip, int(options.get("norm_tokens", 0) or 0),
                      spec.dynamic_sampling)


__all__ = ["UpdateLoss", "update_loss", "AGGREGATIONS", "POLICY_LOSSES", "aggregate", "clip_bounds", "clipped_surrogate", "cispo_loss",
           "gspo_loss", "loss_denominator", "policy_loss", "register_policy_loss", "reinforce_pp_loss"]

