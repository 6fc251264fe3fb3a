import json
from collections import Counter

import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.tasks.curricula import DUMP, SEC, Learnability, Uniform, make_curriculum
from agentgym.tasks.pool import TaskPool
from agentgym.tasks.spec import TaskSpec

ENV = "agentgym/Counter-v0"


def tasks_in(categories, per=5):
    return [TaskSpec(ENV, {"target": 1, "cat": c}, seed=i) for c in categories for i in range(per)]


def cat_of(t):
    return t.params["cat"]


def test_sec_td0_update_by_hand():
    sec = SEC(alpha=0.5, tau=0.5)
    sec.update({"a": [0.2, 0.6], "b": [1.0], "empty": []})
    # reward a = mean(0.2, 0.6) = 0.4: Q_a = 0 + 0.5 (0.4 - 0) = 0.2; Q_b = 0 + 0.5 (1.0 - 0) = 0.5
    assert sec.q == pytest.approx({"a": 0.2, "b": 0.5})
    sec.update({"a": [0.8]})
    # Q_a = 0.2 + 0.5 (0.8 - 0.2) = 0.5; b was not sampled: unchanged
    assert sec.q == pytest.approx({"a": 0.5, "b": 0.5})


def test_sec_boltzmann_probabilities_by_hand():
    sec = SEC(alpha=0.5, tau=0.5)
    sec.update({"a": [0.2, 0.6], "b": [1.0]})
    # softmax([0.2, 0.5, 0.0] / 0.5) = exp([0.4, 1.0, 0]) / (e^0.4 + e^1 + 1)
    assert sec.probabilities(["a", "b", "c"]) == pytest.approx([0.2863329, 0.5217325, 0.1919347], abs=1e-6)


def test_dump_ucb_scores_by_hand():
    dump = DUMP(c=1.0, tau=0.5)
    dump.update({"a": [0.2, 0.4, 0.6], "b": [1.0]})
    # n = (3, 1), total 4: a = 0.4 + sqrt(ln 4 / 3), b = 1.0 + sqrt(ln 4 / 1)
    assert dump.scores(["a", "b"]) == pytest.approx([1.0797780, 2.1774100], abs=1e-6)
    # softmax([1.0797780, 2.1774100] / 0.5)
    assert dump.probabilities(["a", "b"]) == pytest.approx([0.1001766, 0.8998234], abs=1e-6)
    # an arm never sampled comes first
    assert list(dump.probabilities(["a", "b", "c"])) == [0.0, 0.0, 1.0]
    greedy = DUMP(c=1.0, tau=0.0)
    greedy.load_state_dict({**dump.state_dict(), "tau": 0.0})
    assert list(greedy.probabilities(["a", "b"])) == [0.0, 1.0]


def test_dump_mean_uses_only_the_recent_window():
    dump = DUMP(c=0.0, window=2)
    dump.update({"a": [0.2, 0.4, 0.6]})
    assert dump.scores(["a"]) == pytest.approx([0.5])  # mean of the last two
    assert dump.n == {"a": 3}


def test_learnability_probabilities_by_hand():
    pool = TaskPool()  # Beta(1, 1)
    t = tasks_in(["x"], per=3)
    for s in t:
        pool.add(s, "x")
    pool.record(t[0].task_id, 1, 2)  # mean 2/4: weight 0.25
    pool.record(t[1].task_id, 0, 6)  # mean 1/8: weight 7/64
    # t[2] untried: prior mean 1/2, weight 0.25
    cur = Learnability(floor=0.0, shrink=0.0)
    assert cur.probabilities(t, pool, cat_of) == pytest.approx([0.25 / 0.609375, 0.109375 / 0.609375,
                                                                0.25 / 0.609375])


def test_learnability_shrinks_toward_the_category_estimate_by_hand():
    pool = TaskPool()  # Beta(1, 1)
    x, y = tasks_in(["x"], per=2), tasks_in(["y"], per=2)
    for s in x + y:
        pool.add(s, cat_of(s))
    pool.record(x[0].task_id, 0, 8)  # category x: 0 / 8 -> m_x = 1 / 10
    pool.record(y[0].task_id, 6, 8)  # category y: 6 / 8 -> m_y = 7 / 10
    cur = Learnability(floor=0.0, shrink=2.0)
    # p = (s + 2 m) / (n + 2): x0 = 0.2 / 10 = 0.02, x1 (untried) = 0.1, y0 = 7.4 / 10 = 0.74, y1 = 0.7
    assert cur.estimates(x + y, pool, cat_of) == pytest.approx([0.02, 0.1, 0.74, 0.7])
    w = np.array([0.02 * 0.98, 0.1 * 0.9, 0.74 * 0.26, 0.7 * 0.3])
    assert cur.probabilities(x + y, pool, cat_of) == pytest.approx(w / w.sum())


def test_bandit_selection_follows_its_probabilities():
    sec = SEC(alpha=1.0, tau=0.25)
    sec.update({"a": [0.0], "b": [0.25], "c": [0.5]})
    candidates = tasks_in(["a", "b", "c"], per=4)
    rng = np.random.default_rng(1)
    counts = Counter()
    for _ in range(400):
        chosen = sec.select(candidates, 8, rng, None, cat_of)
        assert len(chosen) == 8 and all(t in candidates for t in chosen)
        counts.update(cat_of(t) for t in chosen)
    freq = np.array([counts[c] for c in "abc"]) / 3200
    assert freq == pytest.approx(sec.probabilities(["a", "b", "c"]), abs=0.02)


def test_tasks_within_a_category_are_drawn_without_replacement_when_possible():
    sec = SEC()
    candidates = tasks_in(["only"], per=6)
    chosen = sec.select(candidates, 6, np.random.default_rng(0), None, cat_of)
    assert sorted(t.task_id for t in chosen) == sorted(t.task_id for t in candidates)


def test_uniform_and_learnability_select_without_replacement():
    candidates = tasks_in(["a", "b"], per=5)
    pool = TaskPool()
    for t in candidates:
        pool.add(t, cat_of(t))
    for cur in (Uniform(), Learnability()):
        chosen = cur.select(candidates, 10, np.random.default_rng(0), pool, cat_of)
        assert len(set(chosen)) == 10
        assert len(cur.select(candidates, 25, np.random.default_rng(0), pool, cat_of)) == 25


@pytest.mark.parametrize("name", ["uniform", "learnability", "sec", "dump"])
def test_state_round_trips_and_continues_identically(name):
    a, b = make_curriculum(name), make_curriculum(name)
    a.update({"x": [0.1, 0.3], "y": [0.9]})
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.state_dict() == a.state_dict()
    pool = TaskPool()
    candidates = tasks_in(["x", "y", "z"])
    for t in candidates:
        pool.add(t, cat_of(t))
    pick = lambda c: c.select(candidates, 6, np.random.default_rng(3), pool, cat_of)  # noqa: E731
    assert pick(a) == pick(b)


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="unknown curriculum"):
        make_curriculum("greedy")
    with pytest.raises(ConfigError, match="alpha"):
        make_curriculum("sec", alpha=0.0)
    with pytest.raises(ConfigError, match="bad option"):
        make_curriculum("dump", temperature=1.0)
    with pytest.raises(ConfigError, match="task pool"):
        Learnability().select(tasks_in(["a"]), 2, np.random.default_rng(0), None, cat_of)
