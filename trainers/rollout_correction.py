"""Correction for the rollout-trainer mismatch (`ppo.rollout_correction`).

The engine that sampled a batch (HF in bf16, vLLM, a compiled kernel, an older copy of the
weights) does not give a sampled token exactly the probability the trainer gives it with the same
weights. Per sampled token t of a training sample:

    mu(t)      the engine's probability, recorded at generation (`Step.response_logprobs`)
    pi_old(t)  the trainer's, recomputed in one no-grad pass before the update
    w_t  = pi_old(t) / mu(t) = exp(log pi_old(t) - log mu(t))           level=token
    W_i  = prod_t w_t        = exp(sum_t (log pi_old(t) - log mu(t)))    level=sequence, one per sample

With a correction on, the update's PPO ratio is taken against pi_old (so its trust region is
centred on the trainer's own probabilities) and the mismatch is corrected by a weight w~ on each
token's advantage, A'_t = w~ A_t (w = w_t, or W_i of the token's sample at sequence level):

    none    w~ = 1; the PPO ratio stays against mu (the behaviour before this option)
    tis     w~ = min(w, C)                         truncated IS (Yao et al. 2025, "Your efficient RL
                                                   framework secretly brings you off-policy RL training")
    mis     w~ = w * 1[low <= w <= high]           masked IS: a unit outside the band is dropped, not
                                                   truncated (Liu, Li et al. 2025, "When speed kills
                                                   stability"; their form is low = 0: band [0, 2] here)
    icepop  w~ = w * 1[low <= w_t <= high]         IcePop (Ling Team 2025): the same mask per token only,
                                                   two-sided, band [0.5, 5] by default

Every loss of trainers/policy_losses.py is positively homogeneous in A (w~ >= 0 passes through
PPO's min and clip, GSPO's and CISPO's terms alike), so scaling the advantage is the same as
multiplying the token's policy-gradient term by w~, as verl's rollout correction and SkyRL's
off-policy correction do. A masked token (w~ = 0) has no policy-gradient term; it still counts in
the token-mean denominator and in the KL and entropy terms. w~ carries no gradient.

Every iteration logs the mismatch under `mismatch/` (ppo.rollout_correction.measure, on by default),
at no extra forward pass:
- with a correction on (or ppo.recompute_old_logprobs), from the trainer's logprobs of every sampled
  token, which that pass computes anyway;
- otherwise from the update's first optimizer step: its minibatch's tokens, whose logprobs the loss
  computes before any weight moves, so they are pi_old exactly (a uniformly drawn 1/m of the batch's
  samples with m minibatches per epoch: the means are unbiased, kl_max is over those tokens).
An engine that records no logprobs has no mismatch to log: the run says so once and goes on.
The metrics, over the tokens measured:

    kl_mean, kl_max   the k3 estimate of KL(mu || pi_old) per sampled token, w - 1 - log w >= 0
                      (unbiased under tokens drawn from mu), mean and max over the tokens measured
    ess               effective sample size of the raw weights at the level's units, normalized:
                      (sum w)^2 / (n sum w^2) in (0, 1]; 1 when the two agree
    clipped_frac      tokens whose weight tis truncated
    masked_frac       tokens whose weight mis / icepop set to 0
    weight_mean       mean w~ over tokens
    tokens            how many tokens were measured
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from agentgym.errors import ConfigError

MODES = ("none", "tis", "mis", "icepop")
LEVELS = ("token", "sequence")
DEFAULT_BANDS = {"mis": (0.0, 2.0), "icepop": (0.5, 5.0)}
MAX_LOG_WEIGHT = 50.0  # exp(50) ~ 5e21: a sequence weight past it is as good as infinite, and stays finite


@dataclass
class RolloutCorrectionConfig:
    mode: str = "none"  # none | tis | mis | icepop
    level: str = "token"  # token | sequence (one weight per sample: the product of its token ratios)
    cap: float = 2.0  # tis: C, the largest weight, >= 1
    low: float | None = None  # mis / icepop: the band [low, high] a weight must lie in (None: the mode's default)
    high: float | None = None
    # log the mismatch (mismatch/*) every iteration, from logprobs the iteration computes anyway; false: not
    # with mode none (a correction logs it regardless, from its own pass)
    measure: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """One line for a setting out of range, naming what to change."""
        where = "ppo.rollout_correction"
        if self.mode not in MODES:
            raise ConfigError(f"{where}.mode={self.mode!r} is unknown: choose one of {', '.join(MODES)}")
        if self.level not in LEVELS:
            raise ConfigError(f"{where}.level={self.level!r} is unknown: choose token or sequence")
        if self.mode == "icepop" and self.level != "token":
            raise ConfigError(f"{where}.mode=icepop masks single tokens: set {where}.level=token (or mode=mis for a "
                              "mask over whole samples)")
        if not (isinstance(self.cap, (int, float)) and math.isfinite(self.cap) and self.cap >= 1.0):
            raise ConfigError(f"{where}.cap={self.cap!r} is out of range: the largest weight tis keeps, >= 1 (a cap "
                              "below 1 would shrink the tokens the engine and the trainer agree on), e.g. 2")
        if self.mode not in DEFAULT_BANDS:
            if self.low is not None or self.high is not None:
                raise ConfigError(f"{where}.low / .high are the band of mis and icepop; mode={self.mode} has none"
                                  + (f" (tis truncates at {where}.cap)" if self.mode == "tis" else ""))
        else:
            low, high = self.band()
            if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= 1.0 <= high and low < high):
                raise ConfigError(f"{where} band [low={low:g}, high={high:g}] is out of range: it must hold 1 (a token "
                                  "both sides agree on), 0 <= low <= 1 <= high, e.g. low=0.5 high=5")
        if type(self.measure) is not bool:
            raise ConfigError(f"{where}.measure must be true or false, got {self.measure!r}")

    def band(self) -> tuple[float, float]:
        """[low, high] of mis / icepop: the settings, or the mode's default where unset."""
        default = DEFAULT_BANDS.get(self.mode, (0.0, math.inf))
        low = default[0] if self.low is None else float(self.low)
        return low, default[1] if self.high is None else float(self.high)

    @property
    def active(self) -> bool:
        return self.mode != "none"



def token_weights(cfg: RolloutCorrectionConfig, mask: np.ndarray, trainer_logp: np.ndarray,
                  rollout_logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One sample's raw log-weight and applied weight w~ per position (the module docstring), both
    [n] like its input_ids; positions off the loss (mask 0) get log-weight 0 and w~ 1."""
    on = np.asarray(mask, dtype=bool)
    log_w = np.where(on, np.asarray(trainer_logp, np.float64) - np.asarray(rollout_logp, np.float64), 0.0)
    if cfg.level == "sequence":
        log_w = np.where(on, log_w.sum(), 0.0)
    log_w = np.clip(log_w, -MAX_LOG_WEIGHT, MAX_LOG_WEIGHT)
    w = np.exp(log_w)
    if cfg.mode == "tis":
        applied = np.minimum(w, cfg.cap)
    elif cfg.mode in ("mis", "icepop"):
        low, high = cfg.band()
        applied = np.where((w >= low) & (w <= high), w, 0.0)
    else:
        applied = np.ones_like(w)
    return log_w, np.where(on, applied, 1.0)


@dataclass
class Correction:
    weights: list[np.ndarray]  # per sequence, per position of input_ids: w~ (1 off the loss)
    metrics: dict


def correct(cfg: RolloutCorrectionConfig, masks: Sequence[Sequence[int]], trainer_logprobs: Sequence[Sequence[float]],
            rollout_logprobs: Sequence[Sequence[float]]) -> Correction:
    """The weights w~ of a batch of sequences and the mismatch metrics of the module docstring; the
    three lists are per sequence, aligned with its input_ids (position 0 is never a target)."""
    weights, applied_all, kl_all, unit_log_w = [], [], [], []
    clipped = masked = 0
    for mask, trainer, rollout in zip(masks, trainer_logprobs, rollout_logprobs):
        on = np.asarray(mask, dtype=bool)
        log_w, applied = token_weights(cfg, on, np.asarray(trainer), np.asarray(rollout))
        weights.append(applied)
        if not on.any():
            continue
        d = np.clip((np.asarray(trainer, np.float64) - np.asarray(rollout, np.float64))[on], -MAX_LOG_WEIGHT,
                    MAX_LOG_WEIGHT)
        kl_all.append(np.expm1(d) - d)  # k3 = w - 1 - log w, per token
        applied_all.append(applied[on])
        unit_log_w.append(log_w[on] if cfg.level == "token" else log_w[on][:1])
        raw = np.exp(log_w[on])
        if cfg.mode == "tis":
            clipped += int((raw > cfg.cap).sum())
        masked += int((applied[on] == 0.0).sum())
    if not kl_all:
        return Correction(weights, {})
    kl, applied_flat, log_units = np.concatenate(kl_all), np.concatenate(applied_all), np.concatenate(unit_log_w)
    tokens = len(kl)
    metrics = {"kl_mean": float(kl.mean()), "kl_max": float(kl.max()), "ess": effective_sample_size(log_units),
               "clipped_frac": clipped / tokens, "masked_frac": masked / tokens,
               "weight_mean": float(applied_flat.mean()), "tokens": tokens}
    return Correction(weights, metrics)


def effective_sample_size(log_w: np.ndarray) -> float:
    """(sum w)^2 / (n sum w^2) from log-weights, computed in log space (sequence weights overflow)."""
    log_w = np.asarray(log_w, np.float64)
    if len(log_w) == 0:
        return 1.0
    top = log_w.max()
    s1 = np.exp(log_w - top).sum()
    s2 = np.exp(2 * (log_w - top)).sum()
    return float(s1 * s1 / (len(log_w) * s2))


def rollout_logprobs_missing(trajectories) -> bool:
    """True when a sampled reply of the batch has no engine logprobs (`Step.response_logprobs` None)."""
    return any(step.response_ids and step.response_logprobs is None
               for traj in trajectories if not traj.infra_error for step in traj.steps)


def require_rollout_logprobs(cfg: RolloutCorrectionConfig, trajectories, engine: str) -> None:
    """A correction reads each sampled token's engine logprob: one line when the engine recorded none,
    before anything trains on the batch."""
    if cfg.active and rollout_logprobs_missing(trajectories):
        raise ConfigError(f"ppo.rollout_correction.mode={cfg.mode} needs the engine's logprob of each sampled token, "
                          f"and policy.engine={engine} recorded none: use an engine that records them (hf, vllm) or "
                          "set ppo.rollout_correction.mode=none")


def unmeasured_note(engine: str) -> str:
    """The run's one line when measuring finds no engine logprobs (said once, not an error)."""
    return (f"mismatch/* not logged: policy.engine={engine} records no logprob of the tokens it samples, so the "
            "trainer's cannot be compared with them (ppo.rollout_correction.measure=false silences this)")


def check_rollout_correction(ppo_cfg, rollout_cfg, distilling: bool) -> None:
    """The rules across sections (trainers/checks.py): staleness has its own correction, and
    distillation's advantage would discard the weights."""
    rc = ppo_cfg.rollout_correction
    if not rc.active:
        return
    if distilling:  # distillation replaces the advantages the weights were applied to
        raise ConfigError(f"ppo.rollout_correction.mode={rc.mode} and distill.teacher do not combine yet: the "
                          "distillation advantage replaces the corrected one; set ppo.rollout_correction.mode=none")
    if rollout_cfg.max_staleness > 0 or ppo_cfg.decoupled or ppo_cfg.is_cap is not None:
        raise ConfigError(f"ppo.rollout_correction.mode={rc.mode} corrects a synchronous engine's mismatch; stale "
                          "batches have their own correction (ppo.is_cap, ppo.decoupled): use one, with "
                          "rollout.max_staleness=0 for this one")


__all__ = ["Correction", "LEVELS", "MODES", "RolloutCorrectionConfig", "check_rollout_correction", "correct",
           "effective_sample_size", "require_rollout_logprobs", "rollout_logprobs_missing", "token_weights",
           "unmeasured_note"]
