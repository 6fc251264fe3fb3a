"""Statistics for evaluation: confidence intervals and the unbiased pass@k estimator.

numpy and the standard library only (no scipy): the normal quantile comes from
`statistics.NormalDist`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a confidence interval [low, high] at `confidence`."""

    value: float
    low: float
    high: float
    n: int  # how many observations it rests on (episodes, or tasks for pass@k)
    confidence: float = 0.95
    method: str = ""

    def to_dict(self) -> dict:
        """JSON-safe: an undefined estimate (no observations) has null value and bounds."""
        return {"value": _json_float(self.value), "low": _json_float(self.low), "high": _json_float(self.high),
                "n": self.n, "confidence": self.confidence, "method": self.method}

    @classmethod
    def from_dict(cls, d: dict) -> "Estimate":
        def num(x):
            return math.nan if x is None else float(x)

        return cls(value=num(d["value"]), low=num(d["low"]), high=num(d["high"]), n=int(d["n"]),
                   confidence=float(d.get("confidence", 0.95)), method=d.get("method", ""))

    def format(self, digits: int = 3, percent: bool = False) -> str:
        """'0.812 [0.701, 0.891]' (or '81.2% [70.1, 89.1]')."""
        if self.n == 0 or math.isnan(self.value):
            return "n/a"
        if percent:
            d = max(0, digits - 2)
            return f"{100 * self.value:.{d}f}% [{100 * self.low:.{d}f}, {100 * self.high:.{d}f}]"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _json_float(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """Wilson score interval for a binomial proportion (Wilson 1927).

    center = (p + z²/2n) / (1 + z²/n),  half = z/(1 + z²/n) · sqrt(p(1-p)/n + z²/4n²).
    Unlike the normal (Wald) interval it stays inside [0, 1] and is not degenerate at 0/n or n/n,
    which is where agents often are on hard or easy task categories."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Estimate(math.nan, 0.0, 1.0, 0, confidence, "wilson")
    z = _z(confidence)
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # Clamp float round-off only: the exact interval lies in [0, 1] and contains p.
    return Estimate(p, max(0.0, min(p, center - half)), min(1.0, max(p, center + half)), n, confidence, "wilson")


def clustered_wilson_interval(successes_by_cluster: Sequence[tuple[int, int]], confidence: float = 0.95) -> Estimate:
    """Wilson interval for a success rate whose episodes come in clusters (the episodes of one task
    share its initial state, so they are not independent), given (successes, episodes) per cluster.

    The design effect is the ratio of the ratio estimator's cluster-robust variance to the binomial
    variance (Kish 1965):

        p = sum(y_i) / sum(m_i),   V_cluster = sum((y_i - p m_i)^2) / (sum m_i)^2,
        V_binomial = p (1 - p) / n,   deff = max(1, V_cluster / V_binomial),

    and the Wilson interval is taken at the effective size n / deff (Korn and Graubard 1998). Both
    variances are plug-in estimates (no K / (K - 1) correction on either), so with one episode per
    task deff is exactly 1 and this is the plain Wilson interval; when a task's episodes agree (intra-task correlation rho,
    m episodes a task) deff approaches 1 + (m - 1) rho. It is never narrower than the plain
    interval: a negative intra-task correlation is not credited. With a single cluster, or p at 0
    or 1, the variance ratio is undefined and deff is 1."""
    clusters = [(int(y), int(m)) for y, m in successes_by_cluster if m > 0]
    if any(not 0 <= y <= m for y, m in clusters):
        raise ValueError("need 0 <= successes <= episodes in every cluster")
    successes, n = sum(y for y, _ in clusters), sum(m for _, m in clusters)
    if n == 0:
        return Estimate(math.nan, 0.0, 1.0, 0, confidence, "wilson-clustered")
    p, k = successes / n, len(clusters)
    deff = 1.0
    if k > 1 and 0 < p < 1:
        v_cluster = sum((y - p * m) ** 2 for y, m in clusters) / n ** 2
        deff = max(1.0, v_cluster / (p * (1 - p) / n))
    n_eff = n / deff
    z = _z(confidence)
    denom = 1 + z * z / n_eff
    center = (p + z * z / (2 * n_eff)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff))
    return Estimate(p, max(0.0, min(p, center - half)), min(1.0, max(p, center + half)), n, confidence,
                    "wilson-clustered")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task from n samples with c correct (Chen et al. 2021, eq. 1):

        pass@k = 1 - C(n-c, k) / C(n, k)

    computed as a running product, 1 - prod_{i=n-c+1}^{n} (1 - k/i), which avoids huge binomials."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> tuple[float, int]:
    """pass@k averaged over tasks, given (n, c) per task; tasks with fewer than k samples
    (e.g. after infra errors) cannot estimate pass@k and are left out.
    Returns (mean, number of tasks used); (nan, 0) when no task has k samples."""
    values = [pass_at_k(n, c, k) for n, c in counts if n >= k]
    return (float(np.mean(values)) if values else math.nan), len(values)


def bootstrap_mean(
    values_by_cluster: Sequence[Sequence[float]],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Mean over all values with a percentile cluster-bootstrap interval.

    Episodes of one task are correlated (same initial state), so clusters (tasks) are
    resampled with replacement rather than single episodes; with one episode per task this is
    the ordinary bootstrap. The seed is fixed so a report is reproducible."""
    return bootstrap_ratio([(list(v), [1.0] * len(v)) for v in values_by_cluster], confidence, resamples, seed,
                           method="bootstrap")


def bootstrap_ratio(
    clusters: Sequence[tuple[Sequence[float], Sequence[float]]],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    method: str = "bootstrap-ratio",
) -> Estimate:
    """sum(numerators) / sum(denominators) with a cluster-bootstrap percentile interval.

    Used for pooled rates such as invalid actions / all actions, where episodes (clusters)
    contribute different numbers of steps."""
    clusters = [(list(num), list(den)) for num, den in clusters if len(den) > 0]
    if len(clusters) == 1:
        # One cluster (e.g. a category with a single task) says nothing about the spread
        # between clusters; fall back to the ordinary bootstrap over its items.
        clusters = [([x], [y]) for x, y in zip(*clusters[0])]
    clusters = [(float(np.sum(num)), float(np.sum(den))) for num, den in clusters]
    clusters = [(num, den) for num, den in clusters if den > 0]
    if not clusters:
        return Estimate(math.nan, math.nan, math.nan, 0, confidence, method)
    nums = np.array([c[0] for c in clusters])
    dens = np.array([c[1] for c in clusters])
    value = float(nums.sum() / dens.sum())
    n = int(round(dens.sum()))  # observations: episodes for a mean, steps for a per-step rate
    if len(clusters) == 1:
        return Estimate(value, value, value, n, confidence, method)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(clusters), size=(resamples, len(clusters)))
    stats = nums[idx].sum(axis=1) / dens[idx].sum(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return Estimate(value, float(min(low, value)), float(max(high, value)), n, confidence, method)


def newcombe_difference(a: Estimate, b: Estimate) -> Estimate:
    """Difference of two proportions a - b with Newcombe's hybrid score interval (method 10 of
    Newcombe 1998), built from the two Wilson intervals:

        low  = d - sqrt((p_a - l_a)² + (u_b - p_b)²),  high = d + sqrt((u_a - p_a)² + (p_b - l_b)²).

    It treats the samples as independent; for two policies evaluated on the same tasks it is
    conservative (a paired interval would be narrower)."""
    if a.n == 0 or b.n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, a.confidence, "newcombe")
    d = a.value - b.value
    low = d - math.sqrt((a.value - a.low) ** 2 + (b.high - b.value) ** 2)
    high = d + math.sqrt((a.high - a.value) ** 2 + (b.value - b.low) ** 2)
    return Estimate(d, max(-1.0, low), min(1.0, high), min(a.n, b.n), a.confidence, "newcombe")


def min_detectable_difference(num_tasks: int, episodes_per_task: int, p: float = 0.5, icc: float = 0.3,
                              alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference in success rate between two policies evaluated on `num_tasks` tasks
    x `episodes_per_task` episodes that a two-sided test at level `alpha` finds with probability
    `power` (normal approximation, two independent evaluations).

    Episodes of one task are correlated: the design effect 1 + (k - 1) icc shrinks the k episodes
    of a task to fewer effective ones (icc = 0.3 is a cautious default for sampled
    agents; 1 would make extra episodes worthless, 0 independent). p = 0.5 is the worst case."""
    if num_tasks < 1 or episodes_per_task < 1:
        return math.inf
    effective = num_tasks * episodes_per_task / (1 + (episodes_per_task - 1) * icc)
    z = _z(1 - alpha) + _z(2 * power - 1)  # _z(c) is the two-sided quantile: _z(0.95) = 1.96
    return float(z * math.sqrt(2 * p * (1 - p) / effective))


def paired_gain(before: dict[str, float], after: dict[str, float], confidence: float = 0.95,
                resamples: int = 10000, seed: int = 0) -> Estimate:
    """Mean over tasks of after - before (per-task success rates of two evaluations on the same
    tasks) with a percentile bootstrap over tasks: the pairing removes the between-task spread
    that makes two independent intervals wide. Tasks missing from either side are left out."""
    shared = sorted(set(before) & set(after))
    if not shared:
        return Estimate(math.nan, math.nan, math.nan, 0, confidence, "paired-bootstrap")
    diffs = np.array([after[t] - before[t] for t in shared], dtype=np.float64)
    value = float(diffs.mean())
    rng = np.random.default_rng(seed)
    stats = diffs[rng.integers(0, len(diffs), size=(resamples, len(diffs)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return Estimate(value, float(min(low, value)), float(max(high, value)), len(diffs), confidence, "paired-bootstrap")


def power_warning(num_tasks: int, episodes_per_task: int, difference: float = 0.10) -> str | None:
    """One line when an evaluation of this size cannot detect a `difference` change in success
    rate (80% power, 5% level; see min_detectable_difference), else None."""
    mdd = min_detectable_difference(num_tasks, episodes_per_task)
    if mdd <= difference:
        return None
    return (f"{num_tasks} tasks x {episodes_per_task} episodes detect only a {100 * mdd:.0f}-point change in success "
            f"at 80% power, not {100 * difference:.0f}: evaluate on more tasks or episodes per task")
