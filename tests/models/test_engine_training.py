"""policy.engine=pool in the trainer: a run trains with it (admissible-only rollouts and evaluations, the
first minibatch's ratio 1), it logs which engine decodes, and configurations it cannot serve are refused
in one line."""

from __future__ import annotations

import pytest

from agentgym.errors import ConfigError
from tests.trainers.conftest import tiny_model_dir, toy_config, toy_env_id  # noqa: F401  (fixtures)
from tests.trainers.test_admissible_only import ACTIONS


def test_a_run_trains_and_evaluates_on_the_pool_engine(toy_config, tmp_path, tiny_model_dir):  # noqa: F811
    from agentgym.policies import pool_engine
    from agentgym.trainers.training import train
    from agentgym.trajectory import load_trajectories

    calls = []
    real = pool_engine.PoolEngine.generate_ids

    def counted(engine, *args, **kwargs):
        calls.append(len(args[0]))
        return real(engine, *args, **kwargs)

    pool_engine.PoolEngine.generate_ids = counted
    try:
        cfg = toy_config(tmp_path, tiny_model_dir, "policy.engine=pool", "rollout.admissible_only=true",
                         "checkpoint_every=0", "log.save_trajectories_every=1", "eval.every=2")
        metrics: list = []
        summary = train(cfg, log=lambda _: None, on_iteration=metrics.append)
    finally:
        pool_engine.PoolEngine.generate_ids = real
    assert summary["iterations"] == 2 and calls  # the rollouts and evaluations went through the pool
    assert all(abs(m["train"]["ratio_max_first_minibatch"] - 1.0) < 1e-4 for m in metrics if m["train"]["samples"])
    files = sorted((tmp_path / "run" / "trajectories").glob("train_iter*.jsonl"))
    files += sorted((tmp_path / "run" / "evals").glob("iter*/trajectories.jsonl"))
    steps = [s for f in files for t in load_trajectories(f) for s in t.steps]
    assert steps and all(s.action in ACTIONS for s in steps)


def test_fsdp_is_refused_in_one_line(toy_config, tmp_path, tiny_model_dir):  # noqa: F811
    from agentgym.trainers.checks import validate_config

    with pytest.raises(ConfigError, match="policy.engine=pool reads the trainer's weights whole") as err:
        validate_config(toy_config(tmp_path, tiny_model_dir, "policy.engine=pool", "data_parallel=fsdp"))
    assert "\n" not in str(err.value)
