"""GRPO, RLOO and LOOP: episode-level advantages, checked against hand-computed numbers."""

import math

import numpy as np
import pytest

from agentgym.trainers.estimators import EstimatorConfig, compute_advantages

SQRT_1_3 = math.sqrt(1 / 3)  # 0.57735...


def adv(trajs, **kw):
    return compute_advantages(trajs, EstimatorConfig(**kw))


def test_grpo_group_1001_with_std(traj):
    # R = [1, 0, 0, 1]; mean 0.5; deviations +-0.5
    # unbiased var = 4 * 0.25 / 3 = 1/3 -> std = 0.57735
    # A = +-0.5 / (0.57735 + 1e-6) = +-0.866024
    trajs = [traj("g", [0, 0, 1]), traj("g", [0]), traj("g", [0, 0]), traj("g", [1])]
    out = adv(trajs, name="grpo")
    expected = 0.5 / (SQRT_1_3 + 1e-6)
    assert [len(a) for a in out] == [3, 1, 2, 1]  # one advantage per step, broadcast
    assert all(a.dtype == np.float32 for a in out)
    np.testing.assert_allclose(out[0], [expected] * 3, rtol=1e-6)
    np.testing.assert_allclose(out[1], [-expected], rtol=1e-6)
    np.testing.assert_allclose(out[2], [-expected] * 2, rtol=1e-6)
    np.testing.assert_allclose(out[3], [expected], rtol=1e-6)
    assert expected == pytest.approx(0.866024, abs=1e-6)


def test_grpo_without_std_is_mean_centred(traj):
    # Dr. GRPO: A = R - mean = +-0.5
    trajs = [traj("g", [1]), traj("g", [0]), traj("g", [0]), traj("g", [1])]
    out = adv(trajs, name="grpo", norm_std=False)
    np.testing.assert_allclose(np.concatenate(out), [0.5, -0.5, -0.5, 0.5])


def test_grpo_groups_are_by_group_id_not_position(traj):
    # g1: R = [1, 0] -> mean 0.5, unbiased std sqrt(0.5) = 0.70711 -> +-0.70711
    # g2: R = [0.5, 0.5, 1] -> mean 2/3, deviations [-1/6, -1/6, 1/3]
    #     var = (1/36 + 1/36 + 4/36) / 2 = 1/12 -> std 0.288675 -> [-0.57735, -0.57735, 1.15470]
    trajs = [traj("g1", [1]), traj("g2", [0.5]), traj("g2", [0.5]), traj("g1", [0]), traj("g2", [1.0])]
    out = np.concatenate(adv(trajs, name="grpo"))
    np.testing.assert_allclose(out, [0.707106, -0.577348, -0.577348, -0.707106, 1.154696], atol=2e-5)


def test_outcome_success_vs_score(traj):
    # scores equal (0.5, 0.5) but only the first succeeded
    trajs = [traj("g", [0.5], success=True), traj("g", [0.5], success=False)]
    np.testing.assert_allclose(np.concatenate(adv(trajs, name="grpo")), [0, 0])
    # R = [1, 0] -> +-0.5 / sqrt(0.5) = +-0.70711
    np.testing.assert_allclose(np.concatenate(adv(trajs, name="grpo", outcome="success")), [0.707106, -0.707106], atol=1e-5)


@pytest.mark.parametrize("name", ["rloo", "loop"])
def test_leave_one_out_1001(traj, name):
    # A_0 = 1 - (0 + 0 + 1)/3 = 2/3;  A_1 = 0 - (1 + 0 + 1)/3 = -2/3
    trajs = [traj("g", [1]), traj("g", [0, 0]), traj("g", [0]), traj("g", [0, 1])]
    out = adv(trajs, name=name)
    np.testing.assert_allclose(out[0], [2 / 3], rtol=1e-6)
    np.testing.assert_allclose(out[1], [-2 / 3, -2 / 3], rtol=1e-6)
    np.testing.assert_allclose(out[2], [-2 / 3], rtol=1e-6)
    np.testing.assert_allclose(out[3], [2 / 3, 2 / 3], rtol=1e-6)


@pytest.mark.parametrize("name", ["rloo", "loop"])
def test_leave_one_out_scores_never_std_normalized(traj, name):
    # R = [1, 0.5, 0]:  A_0 = 1 - (0.5 + 0)/2 = 0.75;  A_1 = 0.5 - (1 + 0)/2 = 0;  A_2 = 0 - (1 + 0.5)/2 = -0.75
    trajs = [traj("g", [1.0]), traj("g", [0.5]), traj("g", [0.0])]
    for norm_std in (True, False):  # ignored by LOO estimators
        np.testing.assert_allclose(np.concatenate(adv(trajs, name=name, norm_std=norm_std)), [0.75, 0.0, -0.75], atol=1e-7)


@pytest.mark.parametrize("name", ["grpo", "rloo", "loop", "gigpo"])
@pytest.mark.parametrize("score", [0.0, 1.0, 0.3])
def test_all_equal_groups_give_zero(traj, name, score):
    # identical outcomes (and identical trajectories for gigpo): no baseline difference anywhere.
    # 0.3 is not exact in binary: the mean may differ from 0.3 by one ulp, and dividing that by
    # std + eps must not blow it up.
    trajs = [traj("g", [0.0, score], anchors=["a", "b"]) for _ in range(3)]
    for a in adv(trajs, name=name):
        assert np.all(np.abs(a) < 1e-6)


def test_infra_error_excluded_from_group_statistics(traj):
    # live R = [1, 0, 0] (the infra_error episode's R = 1 is ignored)
    # GRPO: mean 1/3, deviations [2/3, -1/3, -1/3], var = (4/9 + 1/9 + 1/9)/2 = 1/3, std 0.57735
    #       -> [1.15470, -0.57735, -0.57735]; with the infra one included it would be +-0.866
    trajs = [traj("g", [1]), traj("g", [0, 0]), traj("g", [1, 0], infra=True), traj("g", [0])]
    out = adv(trajs, name="grpo")
    np.testing.assert_allclose(out[0], [1.154699], atol=1e-5)
    np.testing.assert_allclose(out[1], [-0.577349] * 2, atol=1e-5)
    np.testing.assert_array_equal(out[2], [0.0, 0.0])
    np.testing.assert_allclose(out[3], [-0.577349], atol=1e-5)
    # RLOO over N = 3 live: A_0 = 1 - (0 + 0)/2 = 1;  A_1 = 0 - (1 + 0)/2 = -0.5
    out = adv(trajs, name="rloo")
    np.testing.assert_allclose(np.concatenate(out), [1.0, -0.5, -0.5, 0.0, 0.0, -0.5])


def test_group_left_with_one_live_episode_gets_zeros(traj):
    # a configured group of 2 whose other episode crashed: no baseline, no signal, no error
    trajs = [traj("g", [1.0]), traj("g", [0.0], infra=True)]
    for name in ("grpo", "rloo", "gigpo"):
        np.testing.assert_array_equal(np.concatenate(adv(trajs, name=name)), [0.0, 0.0])


def test_empty_batch_and_empty_trajectory(traj):
    assert compute_advantages([], EstimatorConfig(name="grpo")) == []
    out = adv([traj("g", []), traj("g", [1.0])], name="grpo")
    assert len(out[0]) == 0
    # R = [0, 1] -> +0.70711 for the one step of the second
    np.testing.assert_allclose(out[1], [0.707106], atol=1e-5)
