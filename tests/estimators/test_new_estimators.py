"""dapo, dr_grpo, gspo, cispo, reinforce_pp advantages on hand-computed batches, and the no-verdict
rule (a judged episode without a verdict is left out of every estimator's statistics)."""

import numpy as np
import pytest

from agentgym.trainers.estimators import ESTIMATORS, EstimatorConfig, compute_advantages
from agentgym.trainers.estimators.dapo import informative_groups, overlong_penalty

from .conftest import build_traj


def _with_lengths(t, lengths):
    for s, n in zip(t.steps, lengths):
        s.response_ids = list(range(n))
    return t


def test_overlong_penalty_piecewise():
    # L_max = 20, L_cache = 4: free up to 16, linear to -1 at 20, -1 past it
    assert overlong_penalty(16, 20, 4) == 0.0
    assert overlong_penalty(18, 20, 4) == pytest.approx(-0.5)
    assert overlong_penalty(20, 20, 4) == pytest.approx(-1.0)
    assert overlong_penalty(25, 20, 4) == -1.0
    assert overlong_penalty(25, 0, 4) == 0.0  # off
    assert overlong_penalty(19, 20, 0) == pytest.approx(-0.75)  # cache defaults to L_max / 5 = 4


def test_dapo_adds_the_overlong_penalty_before_normalizing():
    trajs = [_with_lengths(build_traj("g", [0, 1]), [4, 18]),  # R = 1 - 0.5
             _with_lengths(build_traj("g", [0, 0]), [4, 4]),  # R = 0
             _with_lengths(build_traj("g", [1]), [20])]  # R = 1 - 1
    cfg = EstimatorConfig(name="dapo", options={"overlong_max": 20, "overlong_cache": 4})
    adv = compute_advantages(trajs, cfg)
    r = np.array([0.5, 0.0, 0.0])
    expect = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
    assert adv[0] == pytest.approx([expect[0]] * 2, rel=1e-5)
    assert adv[2] == pytest.approx([expect[2]], rel=1e-5)
    # without the penalty the same batch is plain GRPO
    plain = compute_advantages(trajs, EstimatorConfig(name="dapo"))
    grpo = compute_advantages(trajs, EstimatorConfig(name="grpo"))
    assert all(np.allclose(a, b) for a, b in zip(plain, grpo))


def test_dynamic_sampling_keeps_groups_with_signal():
    trajs = [build_traj("same", [1]), build_traj("same", [1]), build_traj("mixed", [1]), build_traj("mixed", [0])]
    adv = compute_advantages(trajs, EstimatorConfig(name="dapo"))
    assert informative_groups(trajs, adv).tolist() == [False, False, True, True]
    assert ESTIMATORS["dapo"].dynamic_sampling and not ESTIMATORS["grpo"].dynamic_sampling


def test_dr_grpo_never_divides_by_std():
    trajs = [build_traj("g", [0, 1]), build_traj("g", [0, 0]), build_traj("g", [0.5])]
    adv = compute_advantages(trajs, EstimatorConfig(name="dr_grpo", norm_std=True))
    assert adv[0] == pytest.approx([0.5, 0.5]) and adv[1] == pytest.approx([-0.5, -0.5]) and adv[2] == pytest.approx([0.0])


@pytest.mark.parametrize("name", ["gspo", "cispo"])
def test_gspo_and_cispo_use_grpo_advantages(name):
    trajs = [build_traj("g", [0, 1]), build_traj("g", [0, 0]), build_traj("h", [1]), build_traj("h", [0.25])]
    got = compute_advantages(trajs, EstimatorConfig(name=name))
    want = compute_advantages(trajs, EstimatorConfig(name="grpo"))
    assert all(np.allclose(a, b) for a, b in zip(got, want))


def test_reinforce_pp_normalizes_over_the_whole_batch():
    # two groups of one episode each: no group baseline needed
    trajs = [build_traj("a", [0, 1]), build_traj("b", [0, 0, 0])]
    adv = compute_advantages(trajs, EstimatorConfig(name="reinforce_pp", gamma=0.5))
    g = np.array([0.5, 1.0, 0.0, 0.0, 0.0])  # discounted returns of every step
    want = (g - g.mean()) / (g.std(ddof=1) + 1e-6)
    assert np.concatenate(adv) == pytest.approx(want, rel=1e-5)


def _no_verdict(t):
    t.metadata["no_verdict"] = True
    t.score = float("nan")  # a judged outcome that does not exist: never 0
    return t


@pytest.mark.parametrize("name", sorted(set(ESTIMATORS) - {"gae", "spa"}))
def test_no_verdict_is_left_out_of_every_estimator(name):
    """Adding an episode without a verdict to a group changes nobody's advantage, gets all-zero
    advantages itself and never raises on its NaN outcome."""
    base = [build_traj("g", [0, 1]), build_traj("g", [0, 0]), build_traj("g", [0.5]),
            build_traj("h", [1]), build_traj("h", [0])]
    extra = _no_verdict(build_traj("g", [0, 0, 0]))
    cfg = EstimatorConfig(name=name)
    want = compute_advantages(base, cfg)
    got = compute_advantages(base[:3] + [extra] + base[3:], cfg)
    assert np.all(got[3] == 0)
    for a, b in zip(got[:3] + got[4:], want):
        assert np.allclose(a, b)


@pytest.mark.parametrize("name", ["gae", "spa"])
def test_no_verdict_with_values(name):
    base = [build_traj("g", [0, 1]), build_traj("g", [0, 0])]
    extra = _no_verdict(build_traj("g", [1, 1]))
    vals = [np.array([0.2, 0.3]), np.array([0.1, 0.0])]
    kw = {"values": vals} if name == "gae" else {"progress": vals}
    want = compute_advantages(base, EstimatorConfig(name=name), **kw)
    kw = {k: v + [np.array([0.5, 0.5])] for k, v in kw.items()}
    got = compute_advantages(base + [extra], EstimatorConfig(name=name), **kw)
    assert np.all(got[2] == 0)
    assert all(np.allclose(a, b) for a, b in zip(got[:2], want))
