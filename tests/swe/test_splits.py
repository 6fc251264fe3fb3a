"""The shipped task splits: enough tasks, disjoint projects, self-consistent specs."""

import collections
import json

import numpy as np
import pytest

from agentgym.envs.swe.repos import HIDDEN_TESTS, TRAIN_REPOS, UNSEEN_REPOS, VISIBLE_TESTS, repo_path
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.tasks.splits import refuse_heldout
from agentgym.errors import HeldoutTaskError
from agentgym.tasks import generation as _generation
from agentgym.tasks import validation as _validation

SPACE = SWETaskSpace()


def all_tasks():
    return [t for name in SPACE.split_names for t in SPACE.split(name)]


def test_at_least_200_tasks_from_12_projects():
    tasks = all_tasks()
    assert len(tasks) >= 200
    assert len({t.params["repo"] for t in tasks}) >= 12
    assert len({t.task_id for t in tasks}) == len(tasks)


def test_heldout_unseen_projects_never_in_train():
    train_repos = {t.params["repo"] for t in SPACE.split("train")}
    unseen_repos = {t.params["repo"] for t in SPACE.split("heldout_unseen")}
    assert unseen_repos == set(UNSEEN_REPOS)
    assert not train_repos & unseen_repos
    assert {t.params["repo"] for t in SPACE.split("heldout")} <= set(TRAIN_REPOS)
    train_ids = {t.task_id for t in SPACE.split("train")}
    assert not train_ids & _validation.heldout_ids(SPACE)
    with pytest.raises(HeldoutTaskError):
        refuse_heldout(SPACE.split("heldout")[:1], _validation.heldout_ids(SPACE))


def test_specs_are_consistent_with_the_projects():
    for t in all_tasks():
        p = t.params
        source = (repo_path(p["repo"]) / p["file"]).read_text()
        assert source.count(p["before"]) == 1, t.task_id
        mutated = source.replace(p["before"], p["after"])
        assert mutated != source and mutated.count(p["after"]) == 1
        assert p["FAIL_TO_PASS"] and not set(p["FAIL_TO_PASS"]) & set(p["PASS_TO_PASS"])
        assert any(x.startswith(HIDDEN_TESTS + "/") for x in p["FAIL_TO_PASS"])
        assert all(x.startswith((VISIBLE_TESTS + "/", HIDDEN_TESTS + "/")) for x in p["FAIL_TO_PASS"] + p["PASS_TO_PASS"])


def test_issue_text_comes_from_behaviour_not_the_diff():
    for t in all_tasks():
        p = t.params
        issue = p["issue"]
        assert p["file"] not in issue and f"line {p['line']}" not in issue
        assert p["after"].strip() not in issue
        assert "Expected:" in issue


def test_categories_and_operator_variety():
    cats = collections.Counter(SPACE.category(t) for t in all_tasks())
    ops = {c.split("/")[0] for c in cats}
    assert len(ops) >= 7, ops
    assert any(c.endswith("/hidden") for c in cats) and any(c.endswith("/visible") for c in cats)


def test_oracle_plan_is_canonical_json():
    t = SPACE.split("train")[0]
    plan = SPACE.solve(t)
    first = json.loads(plan[0])
    assert first["name"] == "str_replace" and first["arguments"]["new_str"] == t.params["before"]
    assert json.loads(plan[-1])["name"] == "submit"


def test_sample_and_mutate_give_validated_tasks():
    rng = np.random.default_rng(0)
    t = SPACE.sample(rng, repo="romankit")
    assert t.params["repo"] == "romankit" and t.params["FAIL_TO_PASS"]
    m = _generation.mutate(SPACE, t, rng)
    assert m.params["repo"] == "romankit" and m.task_id != t.task_id
    assert _generation.parse(SPACE, "please: repo=romankit operator=off_by_one seed=1").params["operator"] == "off_by_one"
    assert _generation.parse(SPACE, "nothing useful") is None
