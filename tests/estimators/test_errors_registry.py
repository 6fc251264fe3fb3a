"""Bad input: unknown estimators, groups of one, NaN rewards, bad options; the registry."""

import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.estimators import ESTIMATORS, EstimatorConfig, compute_advantages, register_estimator


def test_unknown_estimator_lists_the_names():
    with pytest.raises(ConfigError) as err:
        EstimatorConfig(name="gigp0")
    msg = str(err.value)
    assert "gigp0" in msg and "\n" not in msg
    for name in ("grpo", "rloo", "loop", "gigpo", "gae", "spa"):
        assert name in msg
    # a config mutated after construction is checked again at use
    cfg = EstimatorConfig()
    cfg.name = "nope"
    with pytest.raises(ConfigError, match="choose one of"):
        compute_advantages([], cfg)


@pytest.mark.parametrize("name", ["grpo", "rloo", "loop", "gigpo"])
def test_group_of_one_is_a_config_error(traj, name):
    trajs = [traj("g1", [1]), traj("g1", [0]), traj("lonely", [1])]
    with pytest.raises(ConfigError, match="group_size >= 2") as err:
        compute_advantages(trajs, EstimatorConfig(name=name))
    assert "'lonely'" in str(err.value) and name in str(err.value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_reward_names_the_trajectory(traj, bad):
    trajs = [traj("g", [0, 1]), traj("g", [0, bad], task_id="broken-task")]
    for name in ("grpo", "gigpo"):
        with pytest.raises(ValueError, match=r"trajectory 1 \(task_id='broken-task'.*step 1"):
            compute_advantages(trajs, EstimatorConfig(name=name))


def test_non_finite_outcome_names_the_trajectory(traj):
    trajs = [traj("g", [1]), traj("g", [0], score=float("nan"), task_id="nan-score")]
    with pytest.raises(ValueError, match="trajectory 1 .*nan-score.*outcome"):
        compute_advantages(trajs, EstimatorConfig(name="grpo"))


def test_nan_in_an_infra_error_trajectory_is_ignored(traj):
    trajs = [traj("g", [1]), traj("g", [0]), traj("g", [float("nan")], score=float("nan"), infra=True)]
    out = compute_advantages(trajs, EstimatorConfig(name="grpo", norm_std=False))
    np.testing.assert_allclose(np.concatenate(out), [0.5, -0.5, 0.0])


@pytest.mark.parametrize(
    "kw, field",
    [({"gamma": 1.5}, "gamma"), ({"lam": -0.1}, "lam"), ({"eps": 0.0}, "eps"),
     ({"omega": float("nan")}, "omega"), ({"outcome": "reward"}, "outcome")],
)
def test_bad_options_are_config_errors(kw, field):
    with pytest.raises(ConfigError, match=field):
        EstimatorConfig(**kw)


def test_register_custom_estimator(traj):
    @register_estimator("constant_test")
    def constant(batch, cfg, values=None, progress=None):
        return [np.full(n, 2.0) for n in batch.lengths]  # the per-trajectory form

    try:
        assert ESTIMATORS["constant_test"].fn is constant
        out = compute_advantages([traj("g", [0, 1]), traj("g", [1], infra=True)], EstimatorConfig(name="constant_test"))
        np.testing.assert_array_equal(out[0], [2.0, 2.0])
        np.testing.assert_array_equal(out[1], [0.0])  # infra_error still zeroed
        with pytest.raises(ConfigError, match="already registered"):
            register_estimator("constant_test", lambda *a, **k: None)
    finally:
        ESTIMATORS.pop("constant_test", None)


def test_custom_estimator_with_wrong_shape_is_caught(traj):
    register_estimator("short_test", lambda batch, cfg, **_: [np.zeros(1)])
    try:
        with pytest.raises(ValueError, match="returned 1 arrays for 2 trajectories"):
            compute_advantages([traj("g", [0]), traj("g", [1])], EstimatorConfig(name="short_test"))
    finally:
        ESTIMATORS.pop("short_test", None)


def test_estimators_import_without_torch():
    # the estimators are numpy only; torch is imported by spa_progress alone
    import subprocess
    import sys

    code = "import sys, agentgym.trainers.estimators; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ppo_is_an_alias_of_gae_and_each_method_declares_what_it_needs():
    from agentgym.trainers.estimators import estimator_spec

    assert EstimatorConfig(name="ppo").name == "gae" and estimator_spec("ppo") is ESTIMATORS["gae"]
    needs = {name: (s.group_relative, s.value_head, s.progress_head, s.asymmetric_clip)
             for name, s in ESTIMATORS.items() if name != "constant_test"}
    assert needs == {"grpo": (True, False, False, False), "rloo": (True, False, False, False),
                     "loop": (True, False, False, True), "gigpo": (True, False, False, False),
                     "gae": (False, True, False, False), "spa": (False, False, True, False),
                     "dapo": (True, False, False, False), "dr_grpo": (True, False, False, False),
                     "gspo": (True, False, False, False), "cispo": (True, False, False, False),
                     "reinforce_pp": (False, False, False, False), "tree": (True, False, False, False)}
