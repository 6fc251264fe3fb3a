"""PPO (GAE) and SPA advantages against hand-computed numbers."""

import numpy as np
import pytest
import torch

from agentgym.errors import ConfigError
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages


def ppo(trajs, values, **kw):
    return compute_advantages(trajs, EstimatorConfig(name="ppo", **kw), values=values)


def test_gae_three_steps_terminated(traj):
    # r = [0, 0, 1], V = [0.5, 0.6, 0.8], gamma 0.9, lam 0.8 (gamma*lam = 0.72), V(s_3) = 0
    # delta_2 = 1 + 0.9*0   - 0.8 = 0.2
    # delta_1 = 0 + 0.9*0.8 - 0.6 = 0.12
    # delta_0 = 0 + 0.9*0.6 - 0.5 = 0.04
    # A_2 = 0.2;  A_1 = 0.12 + 0.72*0.2 = 0.264;  A_0 = 0.04 + 0.72*0.264 = 0.23008
    t = traj("g", [0, 0, 1])
    out = ppo([t], [[0.5, 0.6, 0.8]], gamma=0.9, lam=0.8)
    np.testing.assert_allclose(out[0], [0.23008, 0.264, 0.2], atol=1e-6)
    # a bootstrap value after a terminated episode is ignored
    out = ppo([t], [[0.5, 0.6, 0.8, 0.7]], gamma=0.9, lam=0.8)
    np.testing.assert_allclose(out[0], [0.23008, 0.264, 0.2], atol=1e-6)


def test_gae_truncated_bootstraps_from_last_value(traj):
    # as above but truncated with V(s_3) = 0.7:
    # delta_2 = 1 + 0.9*0.7 - 0.8 = 0.83;  A_1 = 0.12 + 0.72*0.83 = 0.7176;  A_0 = 0.04 + 0.72*0.7176 = 0.556672
    t = traj("g", [0, 0, 1], terminated=False, truncated=True)
    out = ppo([t], [np.array([0.5, 0.6, 0.8, 0.7])], gamma=0.9, lam=0.8)
    np.testing.assert_allclose(out[0], [0.556672, 0.7176, 0.83], atol=1e-6)
    # truncated without a bootstrap value: treated as 0
    out = ppo([t], [[0.5, 0.6, 0.8]], gamma=0.9, lam=0.8)
    np.testing.assert_allclose(out[0], [0.23008, 0.264, 0.2], atol=1e-6)


def test_gae_lambda_one_is_return_minus_value_and_batches_mix_lengths(traj):
    # gamma = lam = 1: A_t = sum of future rewards - V_t = [1-0.5, 1-0.6, 1-0.8]; second episode 1 - 0.3.
    # Group size 1 is fine for ppo; a torch tensor works as values.
    trajs = [traj("a", [0, 0, 1]), traj("b", [1])]
    out = ppo(trajs, [torch.tensor([0.5, 0.6, 0.8], requires_grad=True), [0.3]], gamma=1.0, lam=1.0)
    np.testing.assert_allclose(out[0], [0.5, 0.4, 0.2], atol=1e-6)
    np.testing.assert_allclose(out[1], [0.7], atol=1e-6)


def test_gae_invalid_penalty_enters_rewards(traj):
    # r = [0 - 0.1, 1], V = 0, gamma = lam = 1 -> A = [0.9, 1]
    t = traj("g", [0, 1], valid=[False, True])
    out = ppo([t], [[0, 0]], gamma=1.0, lam=1.0, invalid_penalty=0.1)
    np.testing.assert_allclose(out[0], [0.9, 1.0], atol=1e-6)


def test_ppo_needs_values_of_the_right_length(traj):
    t = traj("g", [0, 1])
    with pytest.raises(ConfigError, match="values"):
        compute_advantages([t], EstimatorConfig(name="ppo"))
    with pytest.raises(ValueError, match="trajectory 0 .* 2 steps but 1 values"):
        ppo([t], [[0.1]])
    with pytest.raises(ValueError, match="non-finite value"):
        ppo([t], [[0.1, float("nan")]])


def test_spa_dense_rewards_with_values_is_gae(traj):
    # c = [0.1, 0.2, 0.7], valid = [T, F, T], bonus 0.5 -> r = [0.6, 0.2, 1.2]
    # V = 0, gamma = 0.5, lam = 1:  A_2 = 1.2;  A_1 = 0.2 + 0.5*1.2 = 0.8;  A_0 = 0.6 + 0.5*0.8 = 1.0
    t = traj("g", [0, 0, 1], valid=[True, False, True])
    cfg = EstimatorConfig(name="spa", gamma=0.5, lam=1.0)
    out = compute_advantages([t], cfg, values=[[0, 0, 0]], progress=[[0.1, 0.2, 0.7]])
    np.testing.assert_allclose(out[0], [1.0, 0.8, 1.2], atol=1e-6)
    # with V = [0.5, 0.5, 0.5]: delta = [0.6+0.25-0.5, 0.2+0.25-0.5, 1.2-0.5] = [0.35, -0.05, 0.7]
    # A_2 = 0.7;  A_1 = -0.05 + 0.35 = 0.3;  A_0 = 0.35 + 0.15 = 0.5
    out = compute_advantages([t], cfg, values=[[0.5, 0.5, 0.5]], progress=[[0.1, 0.2, 0.7]])
    np.testing.assert_allclose(out[0], [0.5, 0.3, 0.7], atol=1e-6)


def test_spa_without_values_uses_group_baseline_per_step_index(traj):
    # ep1: c = [0.1, 0.2, 0.7], valid [T, F, T] -> r = [0.6, 0.2, 1.2]; gamma 0.5 -> G = [1.0, 0.8, 1.2]
    # ep2: c = [0, 0],          valid [T, T]    -> r = [0.5, 0.5];      G = [0.75, 0.5]
    # t=0: mean(1.0, 0.75) = 0.875 -> +0.125 / -0.125
    # t=1: mean(0.8, 0.5)  = 0.65  -> +0.15  / -0.15
    # t=2: ep1 alone -> 0
    trajs = [traj("g", [0, 0, 1], valid=[True, False, True]), traj("g", [0, 0])]
    cfg = EstimatorConfig(name="spa", gamma=0.5)
    out = compute_advantages(trajs, cfg, progress=[np.array([0.1, 0.2, 0.7]), [0.0, 0.0]])
    np.testing.assert_allclose(out[0], [0.125, 0.15, 0.0], atol=1e-6)
    np.testing.assert_allclose(out[1], [-0.125, -0.15], atol=1e-6)


def test_spa_grounding_bonus_option(traj):
    # bonus 0: r = c = [0.1, 0.2, 0.7]; V = 0, gamma = lam = 1 -> A = [1.0, 0.9, 0.7]
    t = traj("g", [0, 0, 1], valid=[True, False, True])
    cfg = EstimatorConfig(name="spa", gamma=1.0, grounding_bonus=0.0)
    out = compute_advantages([t], cfg, values=[[0, 0, 0]], progress=[[0.1, 0.2, 0.7]])
    np.testing.assert_allclose(out[0], [1.0, 0.9, 0.7], atol=1e-6)


def test_spa_needs_progress_of_the_right_length(traj):
    t = traj("g", [0, 1])
    with pytest.raises(ConfigError, match="progress"):
        compute_advantages([t, t], EstimatorConfig(name="spa"))
    with pytest.raises(ValueError, match="2 steps but 3 progress"):
        compute_advantages([t], EstimatorConfig(name="spa"), values=[[0, 0]], progress=[[0, 0, 1]])
    with pytest.raises(ConfigError, match="group_size >= 2"):
        compute_advantages([t], EstimatorConfig(name="spa"), progress=[[0, 1]])
