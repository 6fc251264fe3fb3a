"""Task space: oracle coverage, splits, sampling, mutation, categories."""

import numpy as np
import pytest

from agentgym.envs.tools.tasks import LEVELS, TEMPLATES
from agentgym.envs.tools.templates import TRAIN_TEMPLATES
from agentgym.envs.tools.templates_unseen import UNSEEN_TEMPLATES
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.validation import heldout_ids
from agentgym.tasks.validation import validate
from agentgym.tasks.generation import parse
from agentgym.tasks import generation as _generation


def _oracle_solves(env, space, task) -> bool:
    env.reset(options={"task": task})
    plan = space.solve(task)
    assert len(plan) <= 20, "the oracle must fit the time limit"
    for action in plan:
        _, _, terminated, _, info = env.step(action)
        assert info["action_valid"], (task, action)
    return terminated and info["success"] and info["score"] == 1.0


@pytest.mark.parametrize("template", sorted(TEMPLATES))
@pytest.mark.parametrize("level", LEVELS)
def test_oracle_solves_every_template_and_level(env, space, template, level):
    for seed in range(4):
        task = TaskSpec(space.env_id, {"template": template, "level": level}, seed=seed)
        assert _oracle_solves(env, space, task), task


@pytest.mark.slow
def test_oracle_solves_600_sampled_tasks(env, space):
    rng = np.random.default_rng(2026)
    names = sorted(TEMPLATES)
    tasks = [space.sample(rng, template=names[i % len(names)]) for i in range(600)]
    solved = sum(_oracle_solves(env, space, t) for t in tasks)
    assert solved == len(tasks)


def test_shipped_splits_match_the_generator_and_are_disjoint(space):
    built = _generation.build_splits(space)
    ids = {}
    for name in space.split_names:
        shipped = space.split(name)
        assert [t.task_id for t in shipped] == [t.task_id for t in built[name]], f"regenerate {name}"
        ids[name] = {t.task_id for t in shipped}
    assert len(ids["train"]) == 400 and len(ids["heldout"]) == len(ids["heldout_unseen"]) == 100
    assert not ids["train"] & ids["heldout"] and not ids["train"] & ids["heldout_unseen"]
    assert heldout_ids(space) == ids["heldout"] | ids["heldout_unseen"]


def test_heldout_unseen_uses_only_templates_never_in_train(space):
    train = {t.params["template"] for t in space.split("train")} | {t.params["template"] for t in space.split("heldout")}
    unseen = {t.params["template"] for t in space.split("heldout_unseen")}
    assert train == {t.name for t in TRAIN_TEMPLATES}
    assert unseen == {t.name for t in UNSEEN_TEMPLATES}
    assert not train & unseen


def test_every_split_category_is_present(space):
    cats = {space.category(t) for t in space.split("train")}
    assert cats == {f"{t.name}/L{lvl}" for t in TRAIN_TEMPLATES for lvl in LEVELS}


def test_sample_draws_training_templates_unless_asked(space):
    rng = np.random.default_rng(0)
    drawn = {space.sample(rng).params["template"] for _ in range(200)}
    assert drawn == {t.name for t in TRAIN_TEMPLATES}
    task = space.sample(rng, template="cancel_day", level=3)
    assert task.params == {"template": "cancel_day", "level": 3}
    with pytest.raises(ValueError, match="unknown template"):
        space.sample(rng, template="nope")


def test_mutate_keeps_the_template_and_changes_world_or_level(space):
    rng = np.random.default_rng(1)
    base = TaskSpec(space.env_id, {"template": "pay_requests", "level": 1}, seed=5)
    for _ in range(30):
        m = _generation.mutate(space, base, rng)
        assert m.params["template"] == "pay_requests" and m.task_id != base.task_id
        assert m.params["level"] in LEVELS
        assert (m.seed == base.seed) != (m.params["level"] == base.params["level"])
        assert validate(space, m)


def test_invalid_specs_are_rejected_cleanly(space):
    for params in ({"template": "nope"}, {"template": "pay_requests", "level": 7},
                   {"template": "pay_requests", "level": True}, {}):
        task = TaskSpec(space.env_id, params, seed=0)
        assert validate(space, task) is False
        with pytest.raises(ValueError):
            space.category(task)


def test_parse_reads_llm_proposals(space):
    task = parse(space, 'Try this: {"params": {"template": "invite_company", "level": 2}, "seed": 42}')
    assert task == TaskSpec(space.env_id, {"template": "invite_company", "level": 2}, seed=42)
    assert validate(space, task)
    assert parse(space, "no json here") is None


def test_describe_names_the_training_templates_only(space):
    text = _generation.describe(space)
    assert all(t.name in text for t in TRAIN_TEMPLATES)
    assert not any(t.name in text for t in UNSEEN_TEMPLATES)


def test_instructions_are_distinct_across_seeds(env, space):
    seen = set()
    for seed in range(20):
        _, info = env.reset(options={"task": TaskSpec(space.env_id, {"template": "reimburse_receipt", "level": 1},
                                                      seed=seed)})
        seen.add(info["instruction"])
    assert len(seen) >= 18


def test_env_without_task_samples_from_train(env, space):
    _, info = env.reset(seed=3)
    assert info["task_id"] in {t.task_id for t in space.split("train")}


@pytest.mark.slow
def test_worlds_and_plans_do_not_depend_on_python_hash_seed(space):
    import os
    import subprocess
    import sys

    code = ("from agentgym.envs.tools.env import ToolUseEnv\n"
            "env = ToolUseEnv(); sp = env.task_space\n"
            "for t in sp.split('train')[:10] + sp.split('heldout_unseen')[:10]:\n"
            "    obs, info = env.reset(options={'task': t})\n"
            "    print(info['anchor'], repr(sp.solve(t)))\n")
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert outs[0] == outs[1] and outs[0].count("\n") == 20
