import math
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym.evaluation.stats import Estimate, bootstrap_mean, bootstrap_ratio, mean_pass_at_k, pass_at_k, wilson_interval


def test_wilson_matches_hand_computed_8_of_10():
    # z = 1.959964, z^2/n = 0.3841459; center = (0.8 + 0.1920729) / 1.3841459 = 0.716738;
    # half = 1.959964 / 1.3841459 * sqrt(0.016 + 0.0096036) = 0.226578
    est = wilson_interval(8, 10)
    assert est.value == 0.8
    assert est.low == pytest.approx(0.490160, abs=1e-5)
    assert est.high == pytest.approx(0.943317, abs=1e-5)
    assert est.n == 10 and est.method == "wilson"


def test_wilson_at_the_edges_is_not_degenerate():
    zero = wilson_interval(0, 10)
    assert zero.low == 0.0 and zero.high == pytest.approx(0.3841459 / 1.3841459, abs=1e-6)  # 0.277533
    full = wilson_interval(10, 10)
    assert full.high == 1.0 and full.low == pytest.approx(1 - 0.277533, abs=1e-5)


def test_wilson_other_confidence_levels_nest():
    narrow, wide = wilson_interval(30, 100, 0.80), wilson_interval(30, 100, 0.99)
    assert wide.low < narrow.low < 0.3 < narrow.high < wide.high


def test_wilson_refuses_impossible_counts_and_handles_empty():
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    with pytest.raises(ValueError):
        wilson_interval(1, 10, confidence=1.0)
    empty = wilson_interval(0, 0)
    assert math.isnan(empty.value) and empty.n == 0 and empty.format() == "n/a"


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_wilson_contains_the_point_estimate_inside_unit_interval(nc):
    n, c = nc
    est = wilson_interval(c, n)
    if n:
        assert 0.0 <= est.low <= est.value <= est.high <= 1.0


def test_pass_at_k_hand_computed():
    # n=5 samples, c=2 correct
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(5, 2, 4) == 1.0  # fewer than k failures: some draw of 4 always passes
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(3, 3, 1) == 1.0


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_the_binomial_formula(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-9)


def test_pass_at_k_refuses_k_beyond_n():
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_mean_pass_at_k_leaves_out_tasks_with_fewer_than_k_samples():
    counts = [(5, 2), (4, 0), (2, 1)]
    assert mean_pass_at_k(counts, 1) == (pytest.approx((0.4 + 0.0 + 0.5) / 3), 3)
    assert mean_pass_at_k(counts, 3) == (pytest.approx((0.9 + 0.0) / 2), 2)
    value, used = mean_pass_at_k(counts, 6)
    assert math.isnan(value) and used == 0


def test_bootstrap_mean_is_the_plain_mean_with_an_interval_around_it():
    est = bootstrap_mean([[1.0, 0.0], [0.0], [1.0, 1.0, 1.0]])
    assert est.value == pytest.approx(4 / 6) and est.n == 6
    assert 0.0 <= est.low <= est.value <= est.high <= 1.0 and est.low < est.high
    assert bootstrap_mean([[1.0, 0.0], [0.0]]) == bootstrap_mean([[1.0, 0.0], [0.0]])  # seeded


def test_bootstrap_degenerate_cases():
    single = bootstrap_mean([[0.5, 0.5]])
    assert (single.value, single.low, single.high) == (0.5, 0.5, 0.5)
    constant = bootstrap_mean([[2.0], [2.0], [2.0]])
    assert (constant.low, constant.high) == (2.0, 2.0)
    assert math.isnan(bootstrap_mean([]).value)
    # one cluster with spread: the items are resampled instead of reporting a zero-width interval
    one_task = bootstrap_mean([[0.0, 1.0, 0.0, 1.0]])
    assert one_task.value == 0.5 and one_task.low < 0.5 < one_task.high


def test_bootstrap_ratio_pools_numerators_and_denominators():
    # 1 invalid of 5 steps in the first task, 0 of 5 in the second: 1/10, not mean(1/5, 0)
    est = bootstrap_ratio([([1.0, 0.0], [2.0, 3.0]), ([0.0], [5.0])])
    assert est.value == pytest.approx(0.1) and est.n == 10


def test_estimate_round_trips_and_formats():
    est = Estimate(0.8, 0.49016, 0.943317, 10, 0.95, "wilson")
    assert Estimate.from_dict(est.to_dict()) == est
    assert est.format() == "0.800 [0.490, 0.943]"
    assert est.format(percent=True) == "80.0% [49.0, 94.3]"


def test_min_detectable_difference_by_hand():
    from agentgym.evaluation.stats import min_detectable_difference

    # independent episodes (icc 0): (1.959964 + 0.841621) * sqrt(2 * 0.25 / 400) = 0.099051
    assert min_detectable_difference(100, 4, icc=0.0) == pytest.approx(0.099051, abs=1e-5)
    # fully correlated episodes (icc 1): extra episodes add nothing, 100 tasks x 4 = 100 x 1
    assert min_detectable_difference(100, 4, icc=1.0) == pytest.approx(min_detectable_difference(100, 1, icc=1.0))
    assert min_detectable_difference(0, 4) == math.inf


def test_power_warning_for_the_old_main_job_set_not_for_the_new_one():
    from agentgym.evaluation.stats import power_warning

    warning = power_warning(34, 4)
    assert warning is not None and "34 tasks x 4 episodes" in warning and "\n" not in warning
    assert power_warning(234, 4) is None


def test_paired_gain_is_the_mean_per_task_difference_with_a_narrower_interval():
    import numpy as np

    from agentgym.evaluation.stats import paired_gain

    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0, 1, 200)  # tasks differ a lot; the policy gains 0.1 on each
    before = {f"t{i}": float(d) for i, d in enumerate(difficulty)}
    after = {f"t{i}": float(min(1.0, d + 0.1 + rng.normal(0, 0.05))) for i, d in enumerate(difficulty)}
    after["only-after"] = 1.0  # not in both: left out
    gain = paired_gain(before, after)
    diffs = [after[t] - before[t] for t in before]
    assert gain.value == pytest.approx(float(np.mean(diffs))) and gain.n == 200
    assert gain.low < gain.value < gain.high and gain.low > 0.08
    # an unpaired interval would be about sqrt(2 var(difficulty) / n) = 0.058 wide per side; paired, much less
    assert gain.high - gain.low < 0.03
    assert math.isnan(paired_gain({}, after).value)


# --- the success rate's interval with episodes clustered in tasks (issue 68, item 4) ---------------
import numpy as np  # noqa: E402

from agentgym.evaluation.stats import clustered_wilson_interval  # noqa: E402


def test_clustered_wilson_hand_computed():
    """(2 of 3), (0 of 2): p = 0.4, V_cluster = (0.8^2 + 0.8^2) / 25 = 0.0512, V_binomial =
    0.24 / 5 = 0.048, deff = 1.0667, so the Wilson interval at n = 5 / 1.0667 = 4.6875."""
    est = clustered_wilson_interval([(2, 3), (0, 2)])
    n_eff, z, p = 5 / (0.0512 / 0.048), 1.959963984540054, 0.4
    denom = 1 + z * z / n_eff
    center = (p + z * z / (2 * n_eff)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff))
    assert (est.value, est.n, est.method) == (pytest.approx(0.4), 5, "wilson-clustered")
    assert est.low == pytest.approx(center - half) and est.high == pytest.approx(center + half)


def _bounds(est):
    return (est.low, est.high)


def test_clustered_wilson_is_plain_wilson_for_one_episode_a_task_and_never_narrower():
    one_each = [(1, 1)] * 7 + [(0, 1)] * 5
    assert _bounds(clustered_wilson_interval(one_each)) == pytest.approx(_bounds(wilson_interval(7, 12)))
    # tasks whose episodes disagree more than chance would (negative correlation) are not credited
    mixed = [(1, 2)] * 10
    assert _bounds(clustered_wilson_interval(mixed)) == pytest.approx(_bounds(wilson_interval(10, 20)))
    # at 0 or n successes the variance ratio is undefined: the plain interval
    assert _bounds(clustered_wilson_interval([(0, 4)] * 3)) == pytest.approx(_bounds(wilson_interval(0, 12)))
    assert math.isnan(clustered_wilson_interval([]).value)  # no episodes
    with pytest.raises(ValueError):
        clustered_wilson_interval([(3, 2)])


def _coverage(interval, rho: float, tasks: int = 120, episodes: int = 4, p: float = 0.35, runs: int = 600) -> float:
    """How often `interval` covers the true success rate p when each task's success probability is
    drawn from Beta(a, b) with mean p and intra-task correlation rho = 1 / (a + b + 1)."""
    rng = np.random.default_rng(68)
    a = p * (1 / rho - 1)
    b = (1 - p) * (1 / rho - 1)
    covered = 0
    for _ in range(runs):
        probs = rng.beta(a, b, size=tasks)
        wins = rng.binomial(episodes, probs)
        est = interval(wins)
        covered += est.low <= p <= est.high
    return covered / runs


def test_clustered_wilson_holds_its_coverage_where_the_plain_interval_loses_it():
    """A simulation with known intra-task correlation (0.4, 4 episodes a task: design effect 2.2):
    the plain Wilson interval over episodes covers the true rate far less than 95% of the time,
    the clustered one about 95%."""
    plain = _coverage(lambda w: wilson_interval(int(w.sum()), 4 * len(w)), rho=0.4)
    clustered = _coverage(lambda w: clustered_wilson_interval([(int(x), 4) for x in w]), rho=0.4)
    assert plain < 0.85
    assert 0.92 <= clustered <= 0.98
    # with independent episodes it is not wider than it needs to be
    independent = _coverage(lambda w: clustered_wilson_interval([(int(x), 4) for x in w]), rho=0.001)
    assert 0.93 <= independent <= 0.985
