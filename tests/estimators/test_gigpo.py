"""GiGPO: episode advantage + omega * step advantage inside anchor-state groups, by hand."""

import math

import numpy as np
import pytest

from agentgym.trainers.estimators import EstimatorConfig, compute_advantages


def gigpo(trajs, **kw):
    return compute_advantages(trajs, EstimatorConfig(name="gigpo", **kw))


@pytest.fixture
def three_episodes(traj):
    # A reaches s2 at t=2, B at t=1 (shared anchor at different time indices);
    # C visits s1 at t=2 (A visits it at t=1) and two singleton states s3, s4; lengths 3, 2, 4.
    return [
        traj("g", [0, 0, 1], anchors=["s0", "s1", "s2"], score=1.0),
        traj("g", [0, 1], anchors=["s0", "s2"], score=1.0),
        traj("g", [0, 0, 0, 0], anchors=["s0", "s3", "s1", "s4"], score=0.0),
    ]


def test_gigpo_without_std(three_episodes):
    # gamma = 0.5 step returns:  A: [0.25, 0.5, 1]   B: [0.5, 1]   C: [0, 0, 0, 0]
    # anchor groups (mean):  s0 {A0 .25, B0 .5, C0 0} -> .25  => A0 0, B0 +.25, C0 -.25
    #                        s1 {A1 .5, C2 0} -> .25        => A1 +.25, C2 -.25
    #                        s2 {A2 1, B1 1} -> 1           => 0, 0
    #                        s3 {C1}, s4 {C3} singletons    => 0
    # episode: R = [1, 1, 0], mean 2/3 => A^E = [1/3, 1/3, -2/3]
    out = gigpo(three_episodes, gamma=0.5, norm_std=False)
    np.testing.assert_allclose(out[0], [1 / 3, 1 / 3 + 0.25, 1 / 3], atol=1e-6)
    np.testing.assert_allclose(out[1], [1 / 3 + 0.25, 1 / 3], atol=1e-6)
    np.testing.assert_allclose(out[2], [-2 / 3 - 0.25, -2 / 3, -2 / 3 - 0.25, -2 / 3], atol=1e-6)


def test_gigpo_with_std(three_episodes):
    # episode: deviations [1/3, 1/3, -2/3], var = (1/9 + 1/9 + 4/9)/2 = 1/3, std 0.57735
    #          A^E = [0.57735, 0.57735, -1.15470]
    # s0: returns [.25, .5, 0], deviations [0, .25, -.25], var = .125/2 = .0625, std .25 -> [0, 1, -1]
    # s1: returns [.5, 0], deviations [.25, -.25], var = .125/1, std .353553 -> [+.707107, -.707107]
    # s2: equal returns -> 0; s3, s4 singletons -> 0
    e, s1 = 1 / math.sqrt(3), 0.25 / math.sqrt(0.125)
    out = gigpo(three_episodes, gamma=0.5, norm_std=True)
    np.testing.assert_allclose(out[0], [e, e + s1, e], atol=2e-5)
    np.testing.assert_allclose(out[1], [e + 1, e], atol=2e-5)
    np.testing.assert_allclose(out[2], [-2 * e - 1, -2 * e, -2 * e - s1, -2 * e], atol=2e-5)


def test_gigpo_omega_scales_the_step_part(three_episodes):
    # omega = 0.5 halves the step advantages of the no-std case; omega = 0 leaves GRPO's (Dr.) advantage
    out = gigpo(three_episodes, gamma=0.5, norm_std=False, omega=0.5)
    np.testing.assert_allclose(out[1], [1 / 3 + 0.125, 1 / 3], atol=1e-6)
    out0 = gigpo(three_episodes, gamma=0.5, norm_std=False, omega=0.0)
    grpo = compute_advantages(three_episodes, EstimatorConfig(name="grpo", norm_std=False))
    for a, b in zip(out0, grpo):
        np.testing.assert_allclose(a, b)


def test_gigpo_gamma_discounting(traj):
    # Two episodes of equal outcome (A^E = 0) that reach the goal after 1 and 3 steps from s0.
    # gamma = 0.9: X returns [1], Y returns [0.81, 0.9, 1]; anchor s0 = {X0 1, Y0 0.81}, mean 0.905
    # -> X0 +0.095, Y0 -0.095; Y1 (s1) and Y2 (s2) are singletons -> 0.
    # gamma = 1: both returns 1 at s0 -> no preference for the shorter path.
    trajs = [
        traj("g", [1], anchors=["s0"], score=1.0),
        traj("g", [0, 0, 1], anchors=["s0", "s1", "s2"], score=1.0),
    ]
    out = gigpo(trajs, gamma=0.9, norm_std=False)
    np.testing.assert_allclose(out[0], [0.095], atol=1e-6)
    np.testing.assert_allclose(out[1], [-0.095, 0, 0], atol=1e-6)
    out = gigpo(trajs, gamma=1.0, norm_std=False)
    np.testing.assert_allclose(np.concatenate(out), [0, 0, 0, 0], atol=1e-7)


def test_gigpo_invalid_penalty(traj):
    # equal outcomes -> A^E = 0. gamma = 1, penalty 0.1 on X's invalid first step:
    # X rewards [-0.1, 1] -> returns [0.9, 1];  Y rewards [0, 1] -> returns [1, 1]
    # s0 {0.9, 1} mean 0.95 -> X0 -0.05, Y0 +0.05;  s1 {1, 1} -> 0
    trajs = [
        traj("g", [0, 1], anchors=["s0", "s1"], valid=[False, True], score=1.0),
        traj("g", [0, 1], anchors=["s0", "s1"], valid=[True, True], score=1.0),
    ]
    out = gigpo(trajs, gamma=1.0, norm_std=False, invalid_penalty=0.1)
    np.testing.assert_allclose(out[0], [-0.05, 0], atol=1e-6)
    np.testing.assert_allclose(out[1], [0.05, 0], atol=1e-6)
    # without the penalty the two are indistinguishable
    out = gigpo(trajs, gamma=1.0, norm_std=False)
    np.testing.assert_allclose(np.concatenate(out), [0, 0, 0, 0], atol=1e-7)


def test_invalid_no_credit_caps_invalid_steps_only(traj):
    # gamma = 1, no std, penalty 0.1. X: invalid, valid, success; Y: valid, valid, success; Z fails.
    # returns X [0.9, 1], Y [1, 1], Z [-0.1, -0.1]; R = [1, 1, 0] -> A^E = [1/3, 1/3, -2/3]
    # s0 {0.9, 1, -0.1} mean 0.6 -> X0 +0.3, Y0 +0.4, Z0 -0.7; s1 {1, 1} -> 0; Z's s2 singleton -> 0
    trajs = [
        traj("g", [0, 1], anchors=["s0", "s1"], valid=[False, True], score=1.0),
        traj("g", [0, 1], anchors=["s0", "s1"], valid=[True, True], score=1.0),
        traj("g", [0, 0], anchors=["s0", "s2"], valid=[True, False], score=0.0),
    ]
    plain = gigpo(trajs, gamma=1.0, norm_std=False, invalid_penalty=0.1)
    np.testing.assert_allclose(plain[0], [1 / 3 + 0.3, 1 / 3], atol=1e-6)  # a lucky invalid step: +0.63
    capped = gigpo(trajs, gamma=1.0, norm_std=False, invalid_penalty=0.1, invalid_no_credit=True)
    np.testing.assert_allclose(capped[0], [-0.1, 1 / 3], atol=1e-6)  # capped at -penalty
    np.testing.assert_allclose(capped[1], plain[1], atol=1e-7)  # valid steps untouched
    # Z's invalid step is already below the cap (-2/3: singleton anchor group, A^S 0): kept as it is
    np.testing.assert_allclose(capped[2], plain[2], atol=1e-7)
    assert plain[2][1] < -0.1


def test_gigpo_repeated_state_within_one_episode(traj):
    # X loops s0 -> s0 -> goal; Y goes s0 -> goal. gamma = 0.5, no std:
    # X returns [0.25, 0.5, 1] at anchors [s0, s0, s1]; Y returns [0.5, 1] at [s0, s1]
    # s0 {.25, .5, .5} mean 5/12 -> X0 -1/6, X1 +1/12, Y0 +1/12;  s1 {1, 1} -> 0
    trajs = [
        traj("g", [0, 0, 1], anchors=["s0", "s0", "s1"], score=1.0),
        traj("g", [0, 1], anchors=["s0", "s1"], score=1.0),
    ]
    out = gigpo(trajs, gamma=0.5, norm_std=False)
    np.testing.assert_allclose(out[0], [-1 / 6, 1 / 12, 0], atol=1e-6)
    np.testing.assert_allclose(out[1], [1 / 12, 0], atol=1e-6)


def test_gigpo_anchor_groups_do_not_cross_episode_groups(traj):
    # same anchor "s0" in two different groups: each step is alone in its anchor group
    # -> step advantage 0 everywhere; episode advantages are within each group.
    trajs = [
        traj("g1", [1], anchors=["s0"]), traj("g1", [0], anchors=["x"]),
        traj("g2", [0], anchors=["s0"]), traj("g2", [0], anchors=["y"]),
    ]
    out = np.concatenate(gigpo(trajs, gamma=0.5, norm_std=False))
    # g1: R [1, 0] -> +-0.5; g2: all equal -> 0
    np.testing.assert_allclose(out, [0.5, -0.5, 0, 0], atol=1e-7)


def test_gigpo_infra_error_steps_are_nobodys_baseline(traj):
    # The crashed episode Z visited s0 with a large return; it must not shift s0's mean.
    # live: X returns [0.5, 1] (s0, s1), Y returns [0] (s0, score 0). gamma = 0.5, no std.
    # episode: R [1, 0] -> +-0.5.  s0 {X0 .5, Y0 0} mean .25 -> X0 +.25, Y0 -.25;  s1 singleton -> 0
    trajs = [
        traj("g", [0, 1], anchors=["s0", "s1"], score=1.0),
        traj("g", [0], anchors=["s0"], score=0.0),
        traj("g", [5, float("nan")], anchors=["s0", "s1"], score=1.0, infra=True),
    ]
    out = gigpo(trajs, gamma=0.5, norm_std=False)
    np.testing.assert_allclose(out[0], [0.75, 0.5], atol=1e-6)
    np.testing.assert_allclose(out[1], [-0.75], atol=1e-6)
    np.testing.assert_array_equal(out[2], [0.0, 0.0])


def test_penalty_after_discount_stays_on_the_invalid_step(traj):
    # X: valid, invalid, success; Y: valid, valid, success; equal outcomes -> A^E = 0; gamma = 1.
    # placement "reward": X rewards [0, -0.1, 1] -> returns [0.9, 0.9, 1]: the penalty leaks onto X0
    # (s0 {0.9, 1} -> X0 -0.05) and into the anchor group of s1 (X1 -0.05, Y1 +0.05).
    # placement "advantage": returns are equal everywhere (A = 0), then X1 alone gets -0.1.
    trajs = [
        traj("g", [0, 0, 1], anchors=["s0", "s1", "s2"], valid=[True, False, True], score=1.0),
        traj("g", [0, 0, 1], anchors=["s0", "s1", "s2"], valid=[True, True, True], score=1.0),
    ]
    before = gigpo(trajs, gamma=1.0, norm_std=False, invalid_penalty=0.1)
    np.testing.assert_allclose(before[0], [-0.05, -0.05, 0], atol=1e-6)
    np.testing.assert_allclose(before[1], [0.05, 0.05, 0], atol=1e-6)
    after = gigpo(trajs, gamma=1.0, norm_std=False, invalid_penalty=0.1, penalty_placement="advantage")
    np.testing.assert_allclose(after[0], [0, -0.1, 0], atol=1e-6)
    np.testing.assert_allclose(after[1], [0, 0, 0], atol=1e-6)


def test_unknown_penalty_placement_is_a_config_error():
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match="penalty_placement"):
        EstimatorConfig(name="gigpo", penalty_placement="before")
