"""EvalRequest + run_eval: the request checks its fields when made, and `evaluate` is exactly
`run_eval(EvalRequest(...))`."""

import pytest

from agentgym.errors import ConfigError, SplitFileError, UnknownEnvError
from agentgym.policies import OraclePolicy, RandomPolicy
from agentgym.evaluation.evaluate import EvalRequest, evaluate, run_eval


@pytest.mark.parametrize("fields, message", [
    ({"episodes_per_task": 0}, "episodes per task must be >= 1, got 0"),
    ({"limit": -1}, "--limit must be a positive number of tasks, got -1"),
    ({"limit": 0}, "--limit must be a positive number of tasks, got 0"),
    ({"max_batch_episodes": 0}, "max_batch_episodes must be >= 1, got 0"),
    ({"confidence": 1.0}, "confidence must be between 0 and 1, got 1.0"),
])
def test_bad_fields_are_one_line_errors_when_the_request_is_made(counter_env, fields, message):
    with pytest.raises(ConfigError) as err:
        EvalRequest(counter_env, **fields)
    assert str(err.value) == message and "\n" not in str(err.value)


def test_unknown_split_and_env_fail_before_playing(counter_env):
    with pytest.raises(SplitFileError, match="unknown split 'validation'.*heldout") as err:
        run_eval(EvalRequest(counter_env, split="validation"), OraclePolicy())
    assert "\n" not in str(err.value)
    with pytest.raises(UnknownEnvError):
        EvalRequest("agentgym/NoSuchEnv-v9").resolve()


def test_resolve_names_what_would_be_played(counter_env):
    env_id, space, label, tasks = EvalRequest(counter_env, limit=2).resolve()
    assert (env_id, label, len(tasks)) == (counter_env, "heldout", 2)
    assert tasks == space.split("heldout")[:2]


def test_evaluate_and_run_eval_give_identical_results(counter_env, tmp_path):
    kwargs = dict(split="heldout", episodes_per_task=3, limit=5, seed=7, max_batch_episodes=4, confidence=0.9)
    a = evaluate(counter_env, RandomPolicy(seed=2), trajectories_path=tmp_path / "a.jsonl", **kwargs)
    b = run_eval(EvalRequest(counter_env, **kwargs), RandomPolicy(seed=2), trajectories_path=tmp_path / "b.jsonl")
    drop = ("created", "trajectories_path")
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        d.pop("wall_seconds")
        d["metadata"] = {k: v for k, v in d["metadata"].items() if k not in drop}
    assert da == db
    assert [t.to_dict() for t in a.trajectories] == [t.to_dict() for t in b.trajectories]
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    assert 0 < a.success_rate < 1  # a random policy: the equality is not that of two constant results


def test_metadata_records_the_task_limit_not_the_turn_limit(counter_env):
    # 78d71ae reused the name `limit` for the turn limit, and the metadata recorded that instead
    assert run_eval(EvalRequest(counter_env, limit=2), OraclePolicy()).metadata["limit"] == 2
    assert run_eval(EvalRequest(counter_env), OraclePolicy()).metadata["limit"] is None
