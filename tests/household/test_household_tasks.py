"""The household task space: oracle coverage, splits, sampling, mutation, categories, parsing."""

import numpy as np
import pytest

from agentgym import TaskSpec
from agentgym.envs.household.catalog import TASK_TYPES
from agentgym.envs.household.env import HouseholdEnv
from agentgym.envs.household.tasks import LEVELS, combo_of, goal_combos, is_reserved
from agentgym.tasks.splits import load_split
from agentgym.tasks.validation import heldout_ids
from agentgym.tasks.generation import fresh_tasks
from agentgym.tasks.validation import validate
from agentgym.tasks.generation import parse
from agentgym.tasks import generation as _generation
from agentgym.tasks import validation as _validation

SPACE = HouseholdEnv.task_space


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_oracle_solves_500_sampled_tasks_of_each_type(task_type):
    rng = np.random.default_rng(hash(task_type) % 2**32)
    levels = set()
    for _ in range(500):
        task = SPACE.sample(rng, task_type=task_type)
        assert validate(SPACE, task), task
        levels.add(SPACE.category(task))
    assert levels == {f"{task_type}/{level}" for level in LEVELS}


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_the_searching_oracle_finds_objects_by_looking_and_solves(task_type):
    # It may not walk straight to a hidden object: it visits distinct receptacles until the first
    # that holds a goal object (none before it does), and its plan still solves the task.
    from agentgym.envs.household.world import get_layout

    rng = np.random.default_rng(7)
    searched = 0
    for i in range(120):
        task = SPACE.sample(rng, task_type=task_type, level=LEVELS[i % len(LEVELS)])
        plan = SPACE.solve_searching(task, rng)
        env = HouseholdEnv()
        env.reset(options={"task": task})
        for action in plan:
            _, _, terminated, _, info = env.step(action)
            assert info["action_valid"], (action, plan)
        assert terminated and info["success"], plan
        layout = get_layout(task)
        goal_recs = {layout.rec_names[layout.init_loc[o]] for o in layout.goal_objs}
        take = next(i for i, a in enumerate(plan) if a.startswith("take "))
        stops = [a[len("go to "):] for a in plan[:take] if a.startswith("go to ")]
        assert len(stops) == len(set(stops)) and stops[-1] in goal_recs
        assert not goal_recs & set(stops[:-1])
        searched += len(stops) > 1
        if i == 0:  # its first stop does not depend on where the goal object is
            first_stops = {SPACE.solve_searching(task, np.random.default_rng(s))[0] for s in range(40)}
            assert first_stops == {"go to " + name for name in layout.rec_names}
    assert searched > 30  # it often looks elsewhere first, where the plain oracle never does


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_a_dawdling_searcher_idles_with_valid_no_op_commands_and_still_solves(task_type):
    rng = np.random.default_rng(3)
    idle = total = 0
    for i in range(60):
        task = SPACE.sample(rng, task_type=task_type, level=LEVELS[i % len(LEVELS)])
        seed = int(rng.integers(2**31))
        plan = SPACE.solve_searching(task, np.random.default_rng(seed), dawdle_prob=0.4)
        env = HouseholdEnv()
        _, info = env.reset(options={"task": task})
        for action in plan:
            anchor = info["anchor"]
            _, _, terminated, _, info = env.step(action)
            assert info["action_valid"], (action, plan)
            if action in ("look", "inventory") or action.startswith("examine "):
                idle += 1
                assert info["anchor"] == anchor  # idling changes nothing
        assert terminated and info["success"], plan
        total += len(plan)
        # without idle commands it is the plain searching plan's kind: same solve, no idling
        plain = SPACE.solve_searching(task, np.random.default_rng(seed))
        assert not [a for a in plain if a in ("look", "inventory") or a.startswith("examine ")]
    assert 0.3 < idle / total < 0.5  # about dawdle_prob of all commands (geometric runs of idling)


def test_dawdling_is_refused_where_it_means_nothing():
    from agentgym.envs.household.oracle import plan_for
    from agentgym.envs.household.world import get_layout
    from agentgym.policies.scripted import OraclePolicy

    layout = get_layout(SPACE.split("train")[0])
    with pytest.raises(ValueError, match="search_rng"):
        plan_for(layout, dawdle_prob=0.3)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        plan_for(layout, np.random.default_rng(0), dawdle_prob=1.0)
    with pytest.raises(ValueError, match="search=True"):
        OraclePolicy(SPACE, dawdle_prob=0.3)


def test_oracle_solves_every_task_of_every_split():  # 2,600 tasks, a few seconds
    for name in SPACE.split_names:
        failed = [t.task_id for t in SPACE.split(name) if not validate(SPACE, t)]
        assert not failed, f"{name}: {failed[:5]}"


def test_validate_rejects_invalid_tasks():
    assert not validate(SPACE, TaskSpec(SPACE.env_id, {"task_type": "fly"}, 0))
    bad = dict(SPACE.split("train")[0].params, room="garage")
    assert not validate(SPACE, TaskSpec(SPACE.env_id, bad, 0))


def test_shipped_splits_equal_regenerated(tmp_path):
    counts = SPACE.write_splits(tmp_path)
    # heldout: 300 balanced over types and levels, then 200 easy pick/look tasks for the main job's evaluation
    assert counts == {"train": 2000, "heldout": 500, "heldout_unseen": 300}
    for name in SPACE.split_names:
        shipped = (SPACE.split_dir / f"{name}.jsonl").read_bytes()
        regenerated = (tmp_path / f"{name}.jsonl").read_bytes()
        assert shipped == regenerated, f"{name}.jsonl is stale: run python -m agentgym.envs.household.tasks"
        assert [t.task_id for t in load_split(tmp_path / f"{name}.jsonl")] == [t.task_id for t in SPACE.split(name)]


def test_heldout_ids_are_disjoint_and_unseen_combos_never_in_train():
    train = SPACE.split("train")
    heldout, unseen = SPACE.split("heldout"), SPACE.split("heldout_unseen")
    train_ids = {t.task_id for t in train}
    assert len(train_ids) == len(train)
    assert not train_ids & {t.task_id for t in heldout}
    assert not train_ids & {t.task_id for t in unseen}
    train_combos = {combo_of(t) for t in train}
    unseen_combos = {combo_of(t) for t in unseen}
    assert not train_combos & unseen_combos
    assert {t.params["task_type"] for t in unseen} == set(TASK_TYPES)
    assert heldout_ids(SPACE) == {t.task_id for t in heldout} | {t.task_id for t in unseen}


def test_splits_cover_every_type_and_level_with_easy_tasks():
    cats = {}
    for t in SPACE.split("train"):
        cats[SPACE.category(t)] = cats.get(SPACE.category(t), 0) + 1
    assert set(cats) == {f"{tt}/{lvl}" for tt in TASK_TYPES for lvl in LEVELS}
    easy = [t for t in SPACE.split("train") if SPACE.category(t).endswith("/easy")]
    assert all(t.params["num_receptacles"] <= 4 and t.params["num_distractors"] <= 1
               and t.params["closed_fraction"] == 0 for t in easy)


def test_every_task_type_has_seen_and_reserved_goal_combos():
    for task_type in TASK_TYPES:
        assert goal_combos(task_type, unseen=False) and goal_combos(task_type, unseen=True)


def test_sample_respects_fixed_params_and_refuses_impossible_ones():
    rng = np.random.default_rng(0)
    task = SPACE.sample(rng, task_type="pick_heat_then_place", object="potato", receptacle="countertop",
                        level="easy", num_distractors=0)
    assert task.params["room"] == "kitchen" and task.params["num_distractors"] == 0
    assert SPACE.category(task) == "pick_heat_then_place/easy"
    with pytest.raises(ValueError):
        SPACE.sample(rng, task_type="pick_heat_then_place", object="book")
    with pytest.raises(ValueError):
        SPACE.sample(rng, task_type="pick_and_place", level="impossible")


def test_mutate_gives_valid_nearby_tasks_on_the_same_side_of_the_split():
    rng = np.random.default_rng(1)
    for task in SPACE.split("train")[:100] + SPACE.split("heldout_unseen")[:30]:
        child = _generation.mutate(SPACE, task, rng)
        assert child != task and validate(SPACE, child)
        assert child.params["task_type"] == task.params["task_type"]
        changed = {k for k in child.params if child.params[k] != task.params.get(k)}
        assert len(changed) + (child.seed != task.seed) == 1
        target = "lamp" if task.params["task_type"] == "look_at_obj_in_light" else "receptacle"
        assert is_reserved(child.params["object"], child.params[target]) == \
            is_reserved(task.params["object"], task.params[target])


def test_parse_reads_instructions_and_json():
    task = parse(SPACE, "put a hot apple in countertop. level=easy seed=7")
    assert task.params["task_type"] == "pick_heat_then_place" and task.seed == 7
    assert SPACE.category(task) == "pick_heat_then_place/easy" and validate(SPACE, task)
    assert parse(SPACE, "look at book under the desklamp.").params["lamp"] == "desklamp"
    assert parse(SPACE, "put two cellphone in sofa.").params["task_type"] == "pick_two_obj_and_place"
    same = parse(SPACE, '{"params": %s, "seed": 3}' % __import__("json").dumps(dict(task.params)))
    assert same.params == task.params and same.seed == 3
    assert parse(SPACE, "put a hot book in sofa.") is None
    assert parse(SPACE, "") is None and parse(SPACE, "{not json") is None


def test_instruction_matches_goal():
    env = HouseholdEnv()
    for task in SPACE.split("train")[:60]:
        _, info = env.reset(options={"task": task})
        p = task.params
        assert p["object"] in info["instruction"]
        assert (p.get("receptacle") or p.get("lamp")) in info["instruction"]
        assert parse(SPACE, info["instruction"]).params["task_type"] == p["task_type"]


def test_readme_example_is_what_the_env_prints():
    import gymnasium as gym

    readme = (SPACE.split_dir.parent / "README.md").read_text()
    env = gym.make("agentgym/Household-v0")
    obs, _ = env.reset(seed=0)
    assert obs.splitlines()[-1] == "Your task is to: put a hot mug on toaster."
    assert "# Your task is to: put a hot mug on toaster." in readme
    obs, *_ = env.step("go to microwave 1")
    assert f"# {obs}" in readme


def test_fresh_tasks_are_new_valid_and_never_held_out():
    from fnmatch import fnmatch

    space = SPACE
    keep = lambda s: fnmatch(space.category(s), "pick_and_place/easy")  # noqa: E731
    tasks = fresh_tasks(space, 300, seed=3, keep=keep)
    ids = [t.task_id for t in tasks]
    assert len(ids) == len(set(ids)) == 300
    assert not set(ids) & heldout_ids(space)
    assert all(space.category(t) == "pick_and_place/easy" and not _validation.is_reserved(space, t) for t in tasks)
    assert all(validate(space, t) for t in tasks[:20])
    assert [t.task_id for t in fresh_tasks(space, 300, seed=3, keep=keep)] == ids  # deterministic in the seed
    assert [t.task_id for t in fresh_tasks(space, 300, seed=4, keep=keep)] != ids
    # far more layouts than the shipped split has for this category
    assert len(set(ids) - {t.task_id for t in space.split("train")}) > 250


def test_a_runs_second_fresh_draw_is_the_first_without_drawing_again(monkeypatch):
    """The SFT warm start and the RL loop both ask for the run's fresh tasks: one draw, equal lists
    (copies, so one caller's edits never reach the other); another seed or count draws anew."""
    import dataclasses

    from agentgym.trainers import task_selection
    from agentgym.trainers.config import load_config

    draws = []
    real = task_selection.fresh_tasks
    monkeypatch.setattr(task_selection, "fresh_tasks", lambda *a, **k: draws.append(a[1:]) or real(*a, **k))
    env = dataclasses.replace(load_config("household-tiny").env, fresh_tasks=40)
    space = type(SPACE)()  # a space of its own, so no earlier test's draw is reused
    first = task_selection.select_train_tasks(env, space, 5)
    first.clear()
    again = task_selection.select_train_tasks(env, space, 5)
    assert len(again) == 40 and draws == [(40,)]
    assert [t.task_id for t in task_selection.select_train_tasks(env, space, 6)] != [t.task_id for t in again]
    assert len(task_selection.select_train_tasks(dataclasses.replace(env, fresh_tasks=30), space, 5)) == 30
    assert draws == [(40,), (40,), (30,)]


def test_fresh_tasks_that_no_sample_passes_is_one_clear_error():
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match="loosen"):
        fresh_tasks(SPACE, 5, seed=0, keep=lambda s: False, max_draws_per_task=10)


def test_heldout_has_at_least_200_tasks_of_the_main_jobs_categories():
    from agentgym.trainers.config import load_config
    from agentgym.trainers.task_selection import filter_tasks

    cfg = load_config("household-tiny")
    tasks = filter_tasks(SPACE.split("heldout"), cfg.env.task_filter, cfg.env.categories, SPACE)
    assert len(tasks) >= 200 and cfg.eval.num_tasks >= len(tasks)
