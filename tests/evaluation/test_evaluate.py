import json
import math

import pytest

from agentgym import Step, Trajectory, TaskSpec, load_trajectories
from agentgym.errors import ConfigError, SplitFileError, UnknownEnvError
from agentgym.policies import OraclePolicy, RandomPolicy, SamplingParams
from agentgym.tasks.splits import save_split
from agentgym.evaluation.evaluate import EvalResult, compute_metrics, evaluate, resolve_tasks
from agentgym.evaluation.stats import clustered_wilson_interval, wilson_interval


def _traj(task, success, score, valid_flags, infra=False):
    steps = [Step(observation="", anchor="", action_valid=v) for v in valid_flags]
    return Trajectory(task_id=task, group_id=task, steps=steps, success=success, score=score, infra_error=infra,
                      error="worker died" if infra else None)


@pytest.fixture
def constructed():
    # task a: 3 episodes, 2 successes; task b: 2 valid episodes, 0 successes, + 2 infra errors
    # (which claim success and carry steps: they must not count anywhere)
    return [
        _traj("a", True, 1.0, [True, True]),
        _traj("a", True, 1.0, [True, False, True]),
        _traj("a", False, 0.5, [False]),
        _traj("b", False, 0.0, [True, True, True, True]),
        _traj("b", False, 0.25, [False, False]),
        _traj("b", True, 1.0, [True] * 7, infra=True),
        _traj("b", True, 1.0, [], infra=True),
    ]


def test_metrics_on_constructed_trajectories_exclude_infra_errors(constructed):
    r = compute_metrics(constructed, categories={"a": "easy", "b": "hard"}, episodes_per_task=3)
    o = r.overall
    assert (o.tasks, o.episodes, r.infra_errors) == (2, 5, 2)
    assert o.success_rate.value == pytest.approx(2 / 5)
    # episodes clustered in tasks (a: 2 of 3, b: 0 of 2): the interval is the clustered Wilson one,
    # wider than the plain interval that counts the 5 episodes as independent
    clustered, plain = clustered_wilson_interval([(2, 3), (0, 2)]), wilson_interval(2, 5)
    assert (o.success_rate.low, o.success_rate.high) == (clustered.low, clustered.high)
    assert o.success_rate.low < plain.low and o.success_rate.high > plain.high
    assert o.mean_score.value == pytest.approx((1 + 1 + 0.5 + 0 + 0.25) / 5)
    assert o.mean_steps.value == pytest.approx((2 + 3 + 1 + 4 + 2) / 5)
    assert o.invalid_action_rate.value == pytest.approx(4 / 12)  # pooled over steps
    assert o.invalid_action_rate.n == 12
    # pass@k per task: a (n=3, c=2): 2/3, 1, 1; b (n=2 valid, c=0): 0, 0, -- (fewer than 3 samples)
    assert r.pass_at_k[1].value == pytest.approx((2 / 3 + 0) / 2)
    assert r.pass_at_k[2].value == pytest.approx((1 + 0) / 2)
    assert r.pass_at_k[3].value == pytest.approx(1.0) and r.pass_at_k[3].n == 1
    assert r.categories["easy"].success_rate.value == pytest.approx(2 / 3)
    assert r.categories["hard"].success_rate.value == 0.0 and r.categories["hard"].episodes == 2
    b = next(t for t in r.per_task if t["task_id"] == "b")
    assert (b["episodes"], b["successes"], b["infra_errors"], b["category"]) == (2, 0, 2, "hard")
    assert r.infra_error_messages == ["worker died"]


def test_category_parts_split_on_slashes(constructed):
    r = compute_metrics(constructed, categories={"a": "pick/easy", "b": "pick/hard"})
    assert [list(part) for part in r.category_parts] == [["pick"], ["easy", "hard"]]
    assert r.category_parts[0]["pick"].episodes == 5
    assert r.category_parts[1]["easy"].success_rate.value == pytest.approx(2 / 3)
    # categories without a common "a/b" shape have no parts
    assert compute_metrics(constructed, categories={"a": "x/y", "b": "z"}).category_parts == []


def test_all_infra_errors_gives_empty_metrics_not_a_crash():
    r = compute_metrics([_traj("a", True, 1.0, [True], infra=True)])
    assert r.overall.episodes == 0 and r.infra_errors == 1
    assert math.isnan(r.success_rate) and math.isnan(r.pass_at_k[1].value)


def test_result_round_trips_through_json(constructed):
    r = compute_metrics(constructed, categories={"a": "easy"}, env_id="x", split="heldout", policy="p")
    again = EvalResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again.to_dict() == r.to_dict()
    assert again.summary(prefix="eval/")["eval/pass@1"] == r.pass_at_k[1].value


def test_oracle_solves_every_heldout_task(counter_env):
    r = evaluate(counter_env, OraclePolicy(), split="heldout", episodes_per_task=2)
    assert r.num_tasks == 6 and r.overall.episodes == 12 and r.infra_errors == 0
    assert r.success_rate == 1.0 and r.mean_score == 1.0 and r.pass_at_k[2].value == 1.0
    assert r.overall.invalid_action_rate.value == 0.0
    assert r.overall.mean_steps.value == pytest.approx(2 * (1 + 2 + 3) * 2 / 12)  # |target| steps
    assert set(r.categories) == {"up-easy", "up-hard", "down-easy", "down-hard"}
    assert r.policy == "OraclePolicy" and r.split == "heldout"


def test_a_trajectories_path_it_cannot_write_is_refused_before_any_episode(counter_env, tmp_path):
    """It was an IsADirectoryError after the last episode, the evaluation lost."""
    class Counting(OraclePolicy):
        calls = 0

        def generate(self, *args, **kwargs):
            Counting.calls += 1
            return super().generate(*args, **kwargs)

    with pytest.raises(ConfigError, match="trajectories_path .* is a folder, not a file"):
        evaluate(counter_env, Counting(), trajectories_path=tmp_path)
    assert Counting.calls == 0


def test_random_is_worse_than_oracle_and_pass_at_k_rises_with_k(counter_env):
    r = evaluate(counter_env, RandomPolicy(seed=1), split="heldout", episodes_per_task=6)
    assert 0.0 < r.success_rate < 0.8
    values = [r.pass_at_k[k].value for k in range(1, 7)]
    assert values == sorted(values) and values[-1] > values[0]
    assert r.pass_at_k[1].value == pytest.approx(r.success_rate)  # equal episodes per task


def test_limit_seed_and_progress_and_batching(counter_env, tmp_path):
    seen = []
    path = tmp_path / "trajs.jsonl"
    r = evaluate(counter_env, RandomPolicy(seed=3), split="heldout", episodes_per_task=2, limit=4,
                 max_batch_episodes=3, seed=10, trajectories_path=path, on_progress=lambda d, t: seen.append((d, t)))
    assert r.num_tasks == 4 and seen[-1] == (8, 8) and all(t == 8 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    trajs = load_trajectories(path)
    assert len(trajs) == 8
    # task i is reset with seed 10 + i whatever the batch it landed in
    assert [t.seed for t in trajs[::2]] == [10, 11, 12, 13]


def test_infra_errors_are_reported_and_left_out(counter_env, tmp_path):
    ok = TaskSpec(counter_env, {"target": 1}, seed=0)
    broken = TaskSpec(counter_env, {"target": 1, "explode": True}, seed=0)
    save_split(tmp_path / "mixed.jsonl", [ok, broken])
    r = evaluate(counter_env, OraclePolicy(), split=str(tmp_path / "mixed.jsonl"), episodes_per_task=2)
    assert r.infra_errors == 2 and r.overall.episodes == 2 and r.success_rate == 1.0
    assert "simulated environment crash" in r.infra_error_messages[0]
    assert r.split == "mixed.jsonl"


def test_sampling_params_are_recorded(counter_env):
    r = evaluate(counter_env, OraclePolicy(), limit=1, sampling=SamplingParams(temperature=0.0))
    assert r.metadata["sampling"]["temperature"] == 0.0 and r.metadata["tasks"] == 1


def test_bad_input_gives_clear_errors(counter_env, tmp_path):
    with pytest.raises(SplitFileError, match="unknown split 'validation'.*heldout"):
        resolve_tasks(counter_env, "validation")
    with pytest.raises(SplitFileError, match="does not exist"):
        resolve_tasks(counter_env, str(tmp_path / "missing.jsonl"))
    other = tmp_path / "other.jsonl"
    save_split(other, [TaskSpec("agentgym/Household-v0", {"x": 1})])
    with pytest.raises(SplitFileError, match="not agentgym/EvalCounter-v0"):
        resolve_tasks(counter_env, str(other))
    with pytest.raises(ConfigError, match="limit"):
        resolve_tasks(counter_env, "heldout", limit=0)
    with pytest.raises(ConfigError, match=">= 1"):
        evaluate(counter_env, OraclePolicy(), episodes_per_task=0)
    with pytest.raises(UnknownEnvError):
        evaluate("agentgym/NoSuchEnv-v9", OraclePolicy())
