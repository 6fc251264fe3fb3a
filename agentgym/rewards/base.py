"""The Reward contract: episodes in, one Verdict per episode out, and how a verdict replaces or
joins the env's own (verifiable) outcome.

    verdicts = reward.score(trajectories)          # a batch, so judges make one batched call
    stats = apply_reward(trajectories, reward)     # writes the judged outcome into the episodes

A Verdict's score is a float, or None for "no verdict" (the judge's answer could not be parsed, it
timed out, it failed). No verdict is never turned into 0: the episode is marked
`metadata["no_verdict"] = True`, its score becomes NaN, and every advantage estimator leaves it out
of its group statistics (trainers/estimators/common.no_verdict); `apply_reward` counts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from agentgym.errors import ConfigError
from agentgym.trajectory import Trajectory


@dataclass(frozen=True)
class Verdict:
    score: float | None  # None: no verdict (never read as 0)
    rationale: str = ""

    @property
    def has_verdict(self) -> bool:
        return self.score is not None and math.isfinite(self.score)


NO_VERDICT = Verdict(None, "no verdict")


@runtime_checkable
class Reward(Protocol):
    """Scores whole episodes. `score` sees the whole batch: a judge batches its calls, a relative
    judge compares the episodes of a group (equal group_id) with each other."""

    name: str

    def score(self, trajectories: Sequence[Trajectory]) -> list[Verdict]: ...


@dataclass
class FunctionReward:
    """A Python function of one episode as a Reward: fn(traj) -> float | bool | None | (score, rationale)."""

    fn: Callable[[Trajectory], Any]
    name: str = "function"

    def score(self, trajectories: Sequence[Trajectory]) -> list[Verdict]:
        return [as_verdict(self.fn(t)) for t in trajectories]


def as_verdict(value: Any) -> Verdict:
    if isinstance(value, Verdict):
        return value
    rationale = ""
    if isinstance(value, tuple):
        value, rationale = value
    if value is None:
        return Verdict(None, rationale or "no verdict")
    value = float(value)
    return Verdict(value if math.isfinite(value) else None, rationale)


# --- combining a judged outcome with the env's own ---------------------------------------------------
COMBINE = ("replace", "mean", "min", "add")


@dataclass
class RewardStats:
    episodes: int = 0
    judged: int = 0
    no_verdict: int = 0
    verdicts: list = field(default_factory=list)  # (judged, verifiable) of the episodes with a verdict

    def as_dict(self) -> dict:
        return {"episodes": self.episodes, "judged": self.judged, "no_verdict": self.no_verdict,
                **divergence(self.verdicts)}


def combine(judged: float, verifiable: float, how: str, weight: float = 0.5) -> float:
    """replace: the judged score; mean: weight * judged + (1 - weight) * verifiable; min: the lower of
    the two (a judge cannot lift an episode the env failed); add: verifiable + weight * judged."""
    if how == "replace":
        return judged
    if how == "mean":
        return weight * judged + (1.0 - weight) * verifiable
    if how == "min":
        return min(judged, verifiable)
    if how == "add":
        return verifiable + weight * judged
    raise ConfigError(f"unknown reward combination {how!r}: use one of {', '.join(COMBINE)}")


def apply_reward(trajectories: Sequence[Trajectory], reward: Reward, how: str = "replace",
                 weight: float = 0.5) -> RewardStats:
    """Score the live episodes and write the combined outcome into each one, in place: `score`, and
    the last step's reward moved by the same amount (so sparse returns follow). The env's own score
    stays in `metadata["verifiable_score"]` and the verdict in `metadata["reward"]`; an episode with
    no verdict gets `metadata["no_verdict"] = True` and score NaN. infra_error episodes are skipped."""
    if how not in COMBINE:
        raise ConfigError(f"unknown reward combination {how!r}: use one of {', '.join(COMBINE)}")
    live = [t for t in trajectories if not t.infra_error]
    stats = RewardStats(episodes=len(live))
    verdicts = reward.score(live) if live else []
    if len(verdicts) != len(live):
        raise ValueError(f"reward {reward.name!r} returned {len(verdicts)} verdicts for {len(live)} episodes")
    for t, v in zip(live, verdicts):
        verifiable = float(t.metadata.get("verifiable_score", t.score))  # applying twice keeps the env's
        t.metadata["verifiable_score"] = verifiable
        t.metadata["reward"] = {"name": reward.name, "score": v.score if v.has_verdict else None,
                                "rationale": v.rationale[:500]}
        if not v.has_verdict:
            t.metadata["no_verdict"] = True
            t.score = float("nan")
            stats.no_verdict += 1
            continue
        t.metadata.pop("no_verdict", None)
        new = combine(float(v.score), verifiable, how, weight)
        if t.steps:
            t.steps[-1].reward += new - (t.score if math.isfinite(t.score) else verifiable)
        t.score = new
        stats.judged += 1
        stats.verdicts.append((float(v.score), verifiable))
    return stats


def divergence(pairs: Sequence[tuple[float, float]]) -> dict:
    """Judged vs verifiable over the episodes that have both: the two means, their gap, the Pearson
    correlation (NaN when either is constant) and the share of episodes where they disagree on
    pass/fail at 0.5."""
    if not pairs:
        return {}
    judged, verifiable = (np.asarray(x, dtype=np.float64) for x in zip(*pairs))
    corr = float("nan")
    if len(judged) > 1 and judged.std() > 0 and verifiable.std() > 0:
        corr = float(np.corrcoef(judged, verifiable)[0, 1])
    return {"judged_mean": float(judged.mean()), "verifiable_mean": float(verifiable.mean()),
            "gap": float(judged.mean() - verifiable.mean()), "correlation": corr,
            "disagree_rate": float(np.mean((judged >= 0.5) != (verifiable >= 0.5)))}
