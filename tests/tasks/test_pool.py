import json

import pytest

from agentgym.errors import ConfigError, SplitFileError
from agentgym.tasks.pool import IMPOSSIBLE, MASTERED, TaskPool
from agentgym.tasks.spec import TaskSpec

ENV = "agentgym/Counter-v0"


def spec(target, seed=0):
    return TaskSpec(ENV, {"target": target}, seed=seed)


def test_beta_posterior_counts_every_rollout_but_infra_errors(traj):
    pool = TaskPool(prior=(2.0, 3.0))
    a = spec(1)
    assert pool.add(a, "c1") and not pool.add(a, "c1")  # de-duplicated by id
    trajs = [traj(a, "g", True), traj(a, "g", False), traj(a, "g", True), traj(a, "g", True, infra_error=True),
             traj(spec(9), "h", True)]  # the last one is not in the pool: ignored
    assert pool.update(trajs) == 3
    assert pool.posterior(a.task_id) == (4.0, 4.0)  # 2 + 2 successes, 3 + 1 failure
    assert pool.mean(a.task_id) == pytest.approx(0.5)
    assert pool.mean("unknown") == pytest.approx(2 / 5)  # the prior mean


def test_score_outcome_counts_fractional_successes(traj):
    pool = TaskPool(outcome="score")
    a = spec(1)
    pool.add(a, "c")
    pool.update([traj(a, "g", False, score=0.25), traj(a, "g", False, score=0.75)])
    assert pool.posterior(a.task_id) == (2.0, 2.0)


def test_retirement_rules():
    pool = TaskPool(mastered_above=0.8, mastered_min_trials=10, impossible_after=12)
    easy, hard, mid, young = spec(1), spec(2), spec(3), spec(4)
    for s in (easy, hard, mid, young):
        pool.add(s, "c")
    pool.record(easy.task_id, 10, 10)  # mean 11/12 = 0.917 > 0.8 after 10 trials
    pool.record(hard.task_id, 0, 12)  # never solved in 12 tries
    pool.record(mid.task_id, 1, 12)  # solved once: not impossible; mean 2/14
    pool.record(young.task_id, 5, 5)  # mean 6/7 but too few trials to call mastered
    retired = pool.retire()
    assert retired == {MASTERED: [easy.task_id], IMPOSSIBLE: [hard.task_id]}
    assert [e.spec for e in pool.active()] == [mid, young]
    assert pool.add(easy, "c") is False  # a retired task is never re-admitted
    assert pool.retire() == {MASTERED: [], IMPOSSIBLE: []}
    assert pool.summary() == {"tasks": 4, "active": 2, "mastered": 1, "impossible": 1, "trials": 39.0}


def test_frontier_and_extremes():
    pool = TaskPool()
    tasks = [spec(t) for t in range(1, 6)]
    for t in tasks:
        pool.add(t, "c")
    pool.record(tasks[0].task_id, 0, 6)  # mean 1/8
    pool.record(tasks[1].task_id, 3, 6)  # mean 1/2
    pool.record(tasks[2].task_id, 6, 6)  # mean 7/8
    pool.record(tasks[3].task_id, 1, 1)  # mean 2/3, one trial
    assert [e.spec for e in pool.frontier(0.2, 0.8, min_trials=2)] == [tasks[1]]
    assert [e.spec for e in pool.frontier(0.2, 0.8, min_trials=1)] == [tasks[1], tasks[3]]
    assert [e.spec for e in pool.always_failed(4)] == [tasks[0]]
    assert [e.spec for e in pool.always_solved(4)] == [tasks[2]]


def test_category_stats_by_hand():
    pool = TaskPool()
    a, b, c = spec(1), spec(2), spec(3)
    pool.add(a, "x")
    pool.add(b, "x")
    pool.add(c, "y")
    pool.record(a.task_id, 3, 4)  # mean 4/6
    pool.record(b.task_id, 1, 4)  # mean 2/6
    stats = pool.category_stats()
    assert stats["x"]["tasks"] == 2 and stats["x"]["trials"] == 8 and stats["x"]["successes"] == 4
    assert stats["x"]["pooled_mean"] == pytest.approx(5 / 10)
    assert stats["x"]["active_mean"] == pytest.approx(0.5)
    assert stats["y"]["pooled_mean"] == pytest.approx(0.5) and stats["y"]["trials"] == 0


def test_state_round_trips_through_json(tmp_path):
    pool = TaskPool(prior=(1.0, 2.0), impossible_after=3)
    for t in range(1, 4):
        pool.add(spec(t, seed=t), f"c{t}", origin="mutate", parent="p")
    pool.record(spec(1, 1).task_id, 0, 3)
    pool.retire()
    state = json.loads(json.dumps(pool.state_dict()))
    other = TaskPool()
    other.load_state_dict(state)
    assert other.state_dict() == pool.state_dict()
    assert other.mean(spec(2, 2).task_id) == pool.mean(spec(2, 2).task_id)
    pool.save(tmp_path / "pool.json")
    assert TaskPool.load(tmp_path / "pool.json").state_dict() == pool.state_dict()


def test_bad_input_gives_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="prior"):
        TaskPool(prior=(0, 1))
    with pytest.raises(ConfigError, match="unknown task pool option"):
        TaskPool(bogus=1)
    pool = TaskPool()
    pool.add(spec(1), "c")
    with pytest.raises(ValueError, match="bad counts"):
        pool.record(spec(1).task_id, 3, 2)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SplitFileError, match="not a task pool file"):
        TaskPool.load(tmp_path / "bad.json")
    with pytest.raises(SplitFileError, match="does not exist"):
        TaskPool.load(tmp_path / "missing.json")


def test_a_pool_file_that_is_a_fifo_nests_too_deeply_or_is_no_object_is_one_line(tmp_path):
    import os

    from typer.testing import CliRunner

    from agentgym.cli import app

    os.mkfifo(tmp_path / "pipe.json")  # read_text() would wait for a writer for good
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)  # RecursionError in json.loads
    (tmp_path / "list.json").write_text("[1, 2]")
    for name, why in (("pipe.json", "a FIFO"), ("deep.json", "nests too deeply"), ("list.json", "not an object")):
        with pytest.raises(SplitFileError, match="not a task pool file") as err:
            TaskPool.load(tmp_path / name)
        assert why in str(err.value) and "\n" not in str(err.value)
        result = CliRunner().invoke(app, ["tasks", "stats", str(tmp_path / name)])
        assert result.exit_code != 0 and isinstance(result.exception, (SplitFileError, SystemExit))
