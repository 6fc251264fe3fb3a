"""estimator.name=tree against a tree computed by hand (trainers/estimators/tree.py's formulas)."""

from __future__ import annotations

import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
from agentgym.trainers.estimators.tree import branch_config
from agentgym.trajectory import Step, Trajectory


def _traj(tree_id, rewards, parent=None, step=0, infra_error=False, group="g"):
    return Trajectory(task_id="t", group_id=group, steps=[Step("o", "a", reward=r, action_valid=True) for r in rewards],
                      infra_error=infra_error, metadata={"tree": {"id": tree_id, "parent": parent, "step": step}})


def _tree():
    # A and B are the group's episodes; C and D branch from A's step 1, E from B's step 0 (the initial state)
    return [_traj("A", [0, 0, 1]), _traj("B", [0, 0]), _traj("C", [0, 0], "A", 1), _traj("D", [1], "A", 1),
            _traj("E", [1], "B", 0)]


def test_a_hand_computed_tree():
    adv = compute_advantages(_tree(), EstimatorConfig(name="tree", gamma=0.5, norm_std=False))
    # returns (gamma 0.5): A 0.25, 0.5, 1; B 0, 0; C 0, 0; D 1; E 1
    v0 = (0.25 + 0 + 1) / 3  # the initial state: A, B and E from their first step
    v1 = (0.5 + 0 + 1) / 3  # A's step 1: A from there, C and D
    expected = [
        # A: at step 0 its next state is a node; step 2 shares the segment from its node at step 1
        [0 + 0.5 * v1 - v0, 0.5 - v1, 0.5 - v1],
        [0 - v0, 0 - v0],  # B: no branched step after 0, its steps share its return from the start
        [0 - v1, 0 - v1],  # C: its second step shares the branch's return from its start
        [1 - v1],
        [1 - v0],
    ]
    for got, want in zip(adv, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_std_normalization_divides_by_the_spread_of_the_baseline_state():
    plain = compute_advantages(_tree(), EstimatorConfig(name="tree", gamma=0.5, norm_std=False))
    normed = compute_advantages(_tree(), EstimatorConfig(name="tree", gamma=0.5, norm_std=True, eps=1e-6))
    std0 = np.std([0.25, 0, 1], ddof=1)
    np.testing.assert_allclose(normed[1], plain[1] / (std0 + 1e-6), rtol=1e-5)


def test_without_branches_it_is_the_group_mean_baseline():
    trajs = [_traj("A", [0, 1]), _traj("B", [0, 0, 0])]
    adv = compute_advantages(trajs, EstimatorConfig(name="tree", gamma=1.0, norm_std=False))
    np.testing.assert_allclose(adv[0], [1 - 0.5, 1 - 0.5])
    np.testing.assert_allclose(adv[1], [-0.5, -0.5, -0.5])


def test_a_step_penalty_gives_steps_between_nodes_no_credit_of_their_own():
    # every step pays -0.1 and nothing else happens: branches of the same length are worth the same,
    # so no step may look better than another (a baseline from another time would credit later steps)
    trajs = [_traj("A", [-0.1] * 4), _traj("B", [-0.1] * 3, "A", 1), _traj("C", [-0.1] * 3, "A", 1),
             _traj("D", [-0.1] * 4)]
    for a in compute_advantages(trajs, EstimatorConfig(name="tree", gamma=0.9, norm_std=False)):
        np.testing.assert_allclose(a, 0.0, atol=1e-7)


def test_infra_errors_are_nobody_s_baseline():
    trajs = [*_tree(), _traj("F", [1, 1, 1], "A", 1, infra_error=True)]
    with_f = compute_advantages(trajs, EstimatorConfig(name="tree", gamma=0.5, norm_std=False))
    without = compute_advantages(_tree(), EstimatorConfig(name="tree", gamma=0.5, norm_std=False))
    for a, b in zip(with_f, without):
        np.testing.assert_allclose(a, b)
    assert not with_f[-1].any()


def test_the_rollout_shape_comes_from_the_estimator_options():
    cfg = EstimatorConfig(name="tree", options={"k": 3, "every": 2})
    b = branch_config(cfg)
    assert (b.k, b.every, b.at) == (3, 2, "every")
    assert branch_config(EstimatorConfig(name="gigpo")) is None
    with pytest.raises(ConfigError, match="branch.at"):
        branch_config(EstimatorConfig(name="tree", options={"at": "sometimes"}))
