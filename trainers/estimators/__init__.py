"""Advantage estimators: pure functions from a batch of trajectories to one advantage per step.

    from agentgym.trainers.estimators import compute_advantages, EstimatorConfig
    advantages = compute_advantages(trajectories, EstimatorConfig(name="gigpo"))
    # advantages[i][t]: the advantage of step t of trajectory i; the trainer applies it to
    # every response token of that step.

Built in, one module per method, each with the paper's equation in its docstring and its
declaration (`SPECS`: an EstimatorSpec saying what the trainer must give it):

| name  | module   | advantage | needs |
| ----- | -------- | --------- | ----- |
| grpo  | grpo.py  | (R_i - mean) / (std + eps), per episode | a group |
| rloo  | rloo.py  | R_i - mean of the other episodes of the group | a group |
| loop  | rloo.py  | same as rloo; LOOP's asymmetric clip is its declared default | a group |
| gigpo | gigpo.py | episode advantage + omega * step advantage within anchor-state groups | a group |
| gae   | gae.py   | GAE from per-step values of a value head (`ppo` is an alias) | a value head |
| spa   | spa.py   | GAE (with values) or group-baselined returns of c_t + grounding bonus | a progress head |
| dapo  | dapo.py  | GRPO's, outcome + overlong penalty; clip-higher token-level loss, all-equal groups dropped | a group |
| dr_grpo | dr_grpo.py | R_i - mean (no std); token losses summed / a constant | a group |
| gspo  | gspo.py  | GRPO's; sequence-level importance ratio in the loss | a group |
| reinforce_pp | reinforce_pp.py | discounted returns normalized over the whole batch; KL as a token reward | nothing |
| cispo | cispo.py | GRPO's; clipped IS weight times log pi in the loss | a group |
| tree  | tree.py  | Q(s, a) - V(s), V the mean return of a state's branches (tree rollouts) | branches |

Each spec names its policy loss (trainers/policy_losses.py) and declares its own options with their
defaults (`estimator.options.<name>=value`, see options.py).

Shared rules (common.py): groups are trajectories with equal group_id; infra_error
trajectories, and judged ones with no verdict (metadata["no_verdict"], agentgym.rewards), are
left out of every statistic and get all-zero advantages; std is unbiased
(ddof=1); NaN/inf rewards raise ValueError naming the trajectory; a group of one episode with
a group-relative estimator raises ConfigError (set group_size >= 2).

A new estimator is one function `fn(batch: FlatBatch, cfg, values=None, progress=None)`
returning a flat per-step array (steps of all trajectories end to end, see FlatBatch) or a
list of per-trajectory arrays, registered with `register_estimator("name", fn, group_relative=...)`
or as a decorator `@register_estimator("name")`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from agentgym.errors import ConfigError
from agentgym.trajectory import Trajectory
from agentgym.trainers.estimators import cispo, dapo, dr_grpo, gae, gigpo, grpo, gspo, reinforce_pp, rloo, spa, tree
from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch
from agentgym.trainers.estimators.options import resolve_options

Estimator = Callable[..., Any]

ESTIMATORS: dict[str, EstimatorSpec] = {}
# Old names still accepted (resolved by EstimatorConfig): "ppo" was the GAE estimator's name, and
# "ppo" now only means the PPO loss and its config section.
ALIASES = {"ppo": "gae"}

OUTCOMES = ("score", "success", "return")
PENALTY_PLACEMENTS = ("reward", "advantage")


def register_estimator(name: str, fn: Estimator | None = None, *, overwrite: bool = False, **needs: bool):
    """Register `fn` under `name` with what it needs (EstimatorSpec's flags: group_relative,
    value_head, progress_head, asymmetric_clip); without `fn`, return a decorator that does."""

    def add(f: Estimator) -> Estimator:
        if name in ESTIMATORS and ESTIMATORS[name].fn is not f and not overwrite:
            raise ConfigError(f"an advantage estimator named {name!r} is already registered: pick another name")
        ESTIMATORS[name] = EstimatorSpec(name, f, **needs)
        return f

    return add if fn is None else add(fn)


def estimator_spec(name: str) -> EstimatorSpec:
    """The declaration of estimator `name` (an alias resolves to its method)."""
    name = ALIASES.get(name, name)
    if name not in ESTIMATORS:
        raise ConfigError(f"unknown advantage estimator {name!r}: choose one of {', '.join(sorted(ESTIMATORS))}")
    return ESTIMATORS[name]


for _module in (grpo, rloo, gigpo, gae, spa, dapo, dr_grpo, gspo, reinforce_pp, cispo, tree):
    for _spec in _module.SPECS:
        ESTIMATORS[_spec.name] = _spec


@dataclass
class EstimatorConfig:
    name: str = "gigpo"
    gamma: float = 0.95  # step-return discount (GiGPO), GAE gamma
    lam: float = 1.0  # GAE lambda
    omega: float = 1.0  # GiGPO step-advantage weight
    norm_std: bool = True  # divide by group std (GRPO/GiGPO); LOOP/RLOO never
    eps: float = 1e-6
    invalid_penalty: float = 0.0  # subtracted from the step reward of invalid actions (GiGPO public code uses 0.1)
    grounding_bonus: float = 0.5  # SPA
    outcome: str = "score"  # "score" or "success" (or "return": sum of step rewards): which episode outcome R_i is
    # An invalid action changes nothing, so its true advantage is -penalty + (gamma - 1) V(s) <= 0 whatever
    # happens later; episode-level estimators still hand it the episode's luck. With this on, an invalid
    # step's advantage is min(A, -invalid_penalty): it is never reinforced.
    invalid_no_credit: bool = False
    # Where invalid_penalty goes. "reward": subtracted from the step reward before discounting, so
    # it also lowers the returns of the steps before it (discounted) and enters GiGPO's step groups.
    # "advantage": subtracted from the invalid step's final advantage only, after every estimator
    # statistic (verl-agent's placement): the penalty stays on the step that earned it.
    penalty_placement: str = "reward"
    # overrides of the method's declared options (EstimatorSpec.options), e.g. {"clip_high": 0.3} for dapo
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = ALIASES.get(self.name, self.name)
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError with one line saying what to change."""
        if self.name not in ESTIMATORS:
            raise ConfigError(
                f"unknown advantage estimator {self.name!r}: choose one of {', '.join(sorted(ESTIMATORS))}"
            )
        for field_name in ("gamma", "lam"):
            value = getattr(self, field_name)
            if not (0.0 <= value <= 1.0):  # also false for NaN
                raise ConfigError(f"estimator option {field_name}={value} is out of range: use a value in [0, 1]")
        if not (self.eps > 0.0 and math.isfinite(self.eps)):
            raise ConfigError(f"estimator option eps={self.eps} must be a small positive number such as 1e-6")
        for field_name in ("omega", "invalid_penalty", "grounding_bonus"):
            value = getattr(self, field_name)
            if not math.isfinite(value):
                raise ConfigError(f"estimator option {field_name}={value} must be a finite number")
        if self.penalty_placement not in PENALTY_PLACEMENTS:
            raise ConfigError(f"estimator option penalty_placement={self.penalty_placement!r} is unknown: use one of "
                              f"{', '.join(PENALTY_PLACEMENTS)}")
        if self.outcome not in OUTCOMES:
            raise ConfigError(f"estimator option outcome={self.outcome!r} is unknown: use one of {', '.join(OUTCOMES)}")
        resolve_options(ESTIMATORS[self.name], self.options)


def compute_advantages(
    trajectories: Sequence[Trajectory],
    cfg: EstimatorConfig | None = None,
    values: Sequence[Any] | None = None,
    progress: Sequence[Any] | None = None,
) -> list[np.ndarray]:
    """One float32 array per trajectory with one advantage per step.

    values (gae, optionally spa): per trajectory V(s_t) for t = 0..T-1, optionally followed by
    V(s_T) as the bootstrap of a truncated episode. progress (spa): per trajectory the
    progress estimator's contributions c_t. numpy arrays, lists or torch tensors.
    """
    cfg = cfg if cfg is not None else EstimatorConfig()
    cfg.validate()
    spec = estimator_spec(cfg.name)
    batch = FlatBatch.build(trajectories, cfg)
    if spec.group_relative:
        batch.require_groups(cfg.name)
    result = spec.fn(batch, cfg, values=values, progress=progress)
    if isinstance(result, np.ndarray) and result.ndim == 1 and len(result) == len(batch.reward):
        flat = result.astype(np.float64, copy=False)
    else:  # a custom estimator may return one array per trajectory
        if len(result) != batch.num_traj:
            raise ValueError(f"estimator {cfg.name!r} returned {len(result)} arrays for {batch.num_traj} trajectories")
        flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in result] or [np.zeros(0)])
        if len(flat) != len(batch.reward):
            raise ValueError(f"estimator {cfg.name!r} returned {len(flat)} advantages for {len(batch.reward)} steps")
    if cfg.invalid_penalty and cfg.penalty_placement == "advantage":
        flat = flat - cfg.invalid_penalty * (~batch.valid & batch.live)
    if cfg.invalid_no_credit:
        flat = np.where(batch.valid | ~batch.live, flat, np.minimum(flat, -cfg.invalid_penalty))
    bad = np.flatnonzero(~np.isfinite(flat) & batch.live)
    if len(bad):
        i = int(batch.traj[bad[0]])
        raise ValueError(
            f"estimator {cfg.name!r} produced a non-finite advantage for trajectory {i} "
            f"(task_id={trajectories[i].task_id!r}) at step {int(batch.time[bad[0]])}"
        )
    return batch.split(flat)


__all__ = ["ESTIMATORS", "EstimatorConfig", "EstimatorSpec", "FlatBatch", "compute_advantages", "estimator_spec",
           "register_estimator"]
