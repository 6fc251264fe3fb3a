"""Task space: the oracle solves every sampled task; splits are disjoint and held out properly."""

from collections import Counter

import numpy as np
import pytest

from agentgym.envs.search.questions import is_seen, is_unseen
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.validation import heldout_ids
from agentgym.tasks.validation import validate
from agentgym.tasks.generation import parse
from agentgym.tasks import generation as _generation


def _plays(env, task, plan):
    _, info = env.reset(options={"task": task})
    for action in plan:
        _, _, terminated, truncated, info = env.step(action)
        assert info["action_valid"], action
        if terminated or truncated:
            break
    return info


def test_oracle_solves_every_one_of_600_sampled_tasks(env, space):
    rng = np.random.default_rng(12345)
    tasks = [space.sample(rng, unseen=bool(i % 4 == 3)) for i in range(600)]
    assert len({t.task_id for t in tasks}) >= 590
    failures = [t for t in tasks if not _plays(env, t, space.solve(t))["success"]]
    assert failures == []
    categories = Counter(space.category(t) for t in tasks)
    assert len(categories) == 10 and min(categories.values()) >= 20
    assert max(len(space.solve(t)) for t in tasks) <= 9  # fits max_episode_steps


def test_oracle_search_queries_find_the_supporting_documents(source, space):
    rng = np.random.default_rng(7)
    found = total = 0
    for _ in range(100):
        q = space.question(space.sample(rng))
        for query, doc_id in zip(q.queries, q.supporting):
            total += 1
            found += doc_id in {source.docs[row].id for row, _ in source.index.search(query, 5)}
    assert found / total >= 0.95


def test_validate_uses_the_registered_env(space):
    task = space.split("train")[0]
    assert validate(space, task)
    broken = TaskSpec(task.env_id, dict(task.params, start="per-99999"))
    assert not validate(space, broken)


def test_sample_honours_kind_and_hops(space):
    rng = np.random.default_rng(3)
    for kind, hops in [("single", 1), ("bridge", 4), ("composition", 3), ("comparison", 2)]:
        assert space.category(space.sample(rng, kind=kind, hops=hops)) == f"{kind}/{hops}hop"
    with pytest.raises(ValueError):
        space.sample(rng, kind="single", hops=3)


def test_mutations_are_valid_nearby_and_stay_in_their_region(space, world):
    rng = np.random.default_rng(5)
    for task in space.split("train")[:60] + space.split("heldout_unseen")[:30]:
        unseen = is_unseen(world, dict(task.params))
        child = _generation.mutate(space, task, rng)
        assert child.task_id != task.task_id
        assert (is_unseen if unseen else is_seen)(world, dict(child.params))
        assert space.solve(child)


def test_shipped_splits_are_the_built_ones(space):
    built = _generation.build_splits(space)
    for name in ("train", "heldout", "heldout_unseen"):
        assert [t.task_id for t in space.split(name)] == [t.task_id for t in built[name]]


def test_splits_are_disjoint_and_heldout_unseen_is_unseen(space, world):
    train, heldout, unseen = (space.split(n) for n in ("train", "heldout", "heldout_unseen"))
    ids = [t.task_id for t in train + heldout + unseen]
    assert len(ids) == len(set(ids)) and len(train) >= 1000
    assert heldout_ids(space) == {t.task_id for t in heldout + unseen}
    assert all(is_seen(world, dict(t.params)) for t in train + heldout)
    assert all(is_unseen(world, dict(t.params)) for t in unseen)
    # no entity and no relation type of heldout_unseen appears in any train question
    train_entities, train_relations = set(), set()
    for t in train:
        q = space.question(t)
        train_entities |= set(q.entities)
        train_relations |= set(q.relations)
    for t in unseen:
        q = space.question(t)
        assert not set(q.entities) & train_entities
        assert set(q.relations) - train_relations
    assert Counter(space.category(t) for t in train).keys() == {
        "single/1hop", "bridge/2hop", "bridge/3hop", "bridge/4hop", "composition/2hop", "composition/3hop",
        "composition/4hop", "comparison/2hop", "comparison/3hop", "comparison/4hop"}


def test_llm_proposals_parse_into_playable_tasks(space):
    text = ('I propose {"params": {"world_seed": 0, "kind": "single", "start": "cit-00004", "path": [], '
            '"attribute": "population"}, "seed": 0}')
    spec = parse(space, text)
    assert spec is not None and validate(space, spec)
    bare = parse(space, '{"kind": "single", "start": "cit-00004", "path": [], "attribute": "population"}')
    assert bare.task_id == spec.task_id
    assert "world_seed" in _generation.describe(space) and not _generation.describe(space).startswith(" ")
    assert parse(space, "no json here") is None


@pytest.mark.slow
def test_another_world_seed_is_another_world_and_plays(space, env):
    rng = np.random.default_rng(0)
    task = space.sample(rng, kind="bridge", hops=3, world_seed=1)
    assert task.params["world_seed"] == 1 and validate(space, task)
    from agentgym.envs.search.dataset import world_source

    start = task.params["start"]
    assert world_source(1).world.get(start).title != world_source(0).world.get(start).title
    assert world_source(1).world.get(start).title in space.question(task).text
