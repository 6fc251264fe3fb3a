import json

import numpy as np
import pytest

import agentgym
from agentgym.errors import ConfigError, HeldoutTaskError
from agentgym.policies import RandomPolicy
from agentgym.registration import get_task_space
from agentgym.tasks.source import (TasksConfig, make_task_source, make_task_source_from_config,
                                    zero_variance_fraction)
from agentgym.toy import COUNTER_ID
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.validation import heldout_ids

HOUSEHOLD = "agentgym/Household-v0"


def play(source, n, seed, group_size=4):
    tasks = source.next_tasks(n)
    trajs = agentgym.collect(COUNTER_ID, tasks, RandomPolicy(seed=seed), group_size=group_size, seed=seed)
    advantages = compute_advantages(trajs, EstimatorConfig(name="grpo"))
    return tasks, trajs, advantages, source.update(trajs, advantages)


@pytest.mark.parametrize("kind", ["split", "evolve"])
@pytest.mark.parametrize("curriculum", ["uniform", "learnability", "sec", "dump"])
def test_training_loop_contract(counter_space, kind, curriculum):
    source = make_task_source(kind, counter_space, counter_space.split("train"), curriculum=curriculum, seed=0,
                              seed_tasks=8, new_per_round=2, min_active=12)
    heldout = heldout_ids(counter_space)
    for it in range(3):
        tasks, trajs, advantages, metrics = play(source, 4, seed=it)
        assert len(tasks) == 4 and not {t.task_id for t in tasks} & heldout
        assert metrics["zero_variance_frac"] == zero_variance_fraction(trajs)
    assert sum(e.trials for e in source.pool.entries.values()) == 3 * 4 * 4  # every rollout counted
    if kind == "evolve":
        assert len(source.pool) >= 12 and source.generator.round == 3
    if curriculum == "sec":
        assert source.curriculum.q and all(q >= 0 for q in source.curriculum.q.values())
    if curriculum == "dump":
        assert sum(source.curriculum.n.values()) == 3 * 4 * 4


def test_curriculum_reward_is_mean_abs_advantage_per_category(counter_space, traj):
    source = make_task_source("split", counter_space, counter_space.split("train"), curriculum="sec", seed=0,
                              curriculum_opts={"alpha": 1.0})
    a, b = counter_space.split("train")[0], counter_space.split("train")[-1]
    ca, cb = counter_space.category(a), counter_space.category(b)
    assert ca != cb
    trajs = [traj(a, "g0", True, steps=2), traj(a, "g0", False, steps=1), traj(b, "g1", False, steps=2),
             traj(b, "g1", False, steps=2, infra_error=True)]
    advantages = [np.array([1.0, -3.0]), np.array([0.5]), np.array([0.0, 0.0]), np.array([9.0, 9.0])]
    metrics = source.update(trajs, advantages)
    # a: mean(|1|, |-3|) = 2 and 0.5 -> 1.25; b: 0 (the infra-error trajectory is left out)
    assert source.curriculum.q == pytest.approx({ca: 1.25, cb: 0.0})
    assert metrics["zero_variance_frac"] == 0.5  # g0 mixed, g1 all failed
    assert source.pool.entries[a.task_id].trials == 2 and source.pool.entries[b.task_id].trials == 1
    with pytest.raises(ValueError, match="4 trajectories but 3 advantage arrays"):
        source.update(trajs, advantages[:3])


@pytest.mark.parametrize("kind", ["split", "evolve"])
def test_state_round_trip_continues_identically(counter_space, kind):
    def fresh():
        return make_task_source(kind, counter_space, counter_space.split("train"), curriculum="sec", seed=4,
                                seed_tasks=6, new_per_round=3, min_active=10)

    a = fresh()
    for it in range(2):
        play(a, 3, seed=it)
    b = fresh()
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.state_dict() == a.state_dict()
    for it in range(2, 4):
        ta, *_ = play(a, 3, seed=it)
        tb, *_ = play(b, 3, seed=it)
        assert ta == tb
    assert a.state_dict() == b.state_dict()


def test_household_evolve_source_never_emits_heldout_tasks():
    space = get_task_space(HOUSEHOLD)
    source = make_task_source("evolve", space, space.split("train"), curriculum="learnability", seed=1,
                              new_per_round=8, min_active=64)
    heldout = heldout_ids(space)
    emitted = [t for _ in range(30) for t in source.next_tasks(16)]
    assert not {t.task_id for t in emitted} & heldout
    assert not set(source.pool.entries) & heldout


def test_bad_configuration_is_refused(counter_space):
    train = counter_space.split("train")
    with pytest.raises(HeldoutTaskError, match="held-out split"):
        make_task_source("split", counter_space, train + counter_space.split("heldout")[:1])
    with pytest.raises(HeldoutTaskError):
        make_task_source("evolve", counter_space, counter_space.split("heldout")[:3])
    with pytest.raises(ConfigError, match="unknown task source"):
        make_task_source("replay", counter_space, train)
    with pytest.raises(ConfigError, match="unknown curriculum"):
        make_task_source("split", counter_space, train, curriculum="plr")
    with pytest.raises(ConfigError, match="needs training tasks"):
        make_task_source("split", counter_space, [])
    with pytest.raises(ConfigError, match="at least 1"):
        make_task_source("split", counter_space, train).next_tasks(0)
    a = make_task_source("split", counter_space, train, curriculum="sec")
    b = make_task_source("split", counter_space, train, curriculum="dump")
    with pytest.raises(ConfigError, match="resume with the same tasks settings"):
        b.load_state_dict(a.state_dict())


def test_zero_variance_uses_the_pool_outcome(counter_space, traj):
    a = counter_space.split("train")[0]
    # g0: both failed with different partial scores; g1: one success
    trajs = [traj(a, "g0", False, score=0.2), traj(a, "g0", False, score=0.6), traj(a, "g1", True),
             traj(a, "g1", False, score=0.0)]
    assert zero_variance_fraction(trajs, "success") == 0.5
    assert zero_variance_fraction(trajs, "score") == 0.0


def test_source_from_the_trainer_config_section(counter_space):
    cfg = {"source": "evolve", "curriculum": "dump", "curriculum_opts": {"c": 1.0}, "pool": {"impossible_after": 8},
           "generator": {"weights": {"sample": 1.0}}, "seed_tasks": 4, "new_per_round": 2, "min_active": 6}
    source = make_task_source_from_config(cfg, counter_space, counter_space.split("train"), seed=0)
    assert source.kind == "evolve" and source.curriculum.c == 1.0 and source.pool.config.impossible_after == 8
    assert len(source.next_tasks(3)) == 3 and len(source.pool.active()) >= 6
    default = make_task_source_from_config(TasksConfig(), counter_space, counter_space.split("train"), seed=0)
    assert default.kind == "split" and default.curriculum.name == "uniform"
    with pytest.raises(ConfigError, match="unknown config field.*tasks.curiculum"):
        make_task_source_from_config({"curiculum": "sec"}, counter_space, counter_space.split("train"), seed=0)
    with pytest.raises(ConfigError, match="unknown task generator option"):
        make_task_source_from_config({"source": "evolve", "generator": {"wieghts": {}}}, counter_space,
                                     counter_space.split("train"), seed=0)


class _NoVariants(TaskSpace):
    """A task space that can sample and solve but neither mutate nor grade difficulty."""

    env_id = COUNTER_ID

    def sample(self, rng, **_):
        from agentgym.tasks.spec import TaskSpec

        return TaskSpec(COUNTER_ID, {"target": int(rng.integers(1, 5))})

    def solve(self, spec):
        return ["inc"] * spec.params["target"]

    def category(self, spec):
        return "all"


def test_evolving_a_space_that_cannot_mutate_or_grade_is_one_line():
    space = _NoVariants()
    with pytest.raises(ConfigError, match="cannot mutate its tasks.*tasks.source=split") as err:
        make_task_source("evolve", space, [], heldout_ids=set())
    assert "\n" not in str(err.value)
    # only plain draws: fine without mutate
    make_task_source("evolve", space, [], heldout_ids=set(), seed_tasks=0, new_per_round=0,
                     generator={"weights": {"sample": 1.0}})


def test_asking_for_graded_variants_needs_a_difficulty(counter_space):
    assert not callable(getattr(counter_space, "difficulty", None))  # the counter has none
    with pytest.raises(ConfigError, match="no difficulty.*easier") as err:
        make_task_source("evolve", counter_space, counter_space.split("train"),
                         generator={"weights": {"mutate": 1.0, "easier": 1.0}})
    assert "\n" not in str(err.value)
    # the default weights fall back to plain variants, as before
    make_task_source("evolve", counter_space, counter_space.split("train"), seed_tasks=2, min_active=2)


def test_the_generators_task_counts_are_in_the_metrics(counter_space):
    source = make_task_source("evolve", counter_space, counter_space.split("train"), seed=0, seed_tasks=6,
                              new_per_round=3, min_active=8)
    play(source, 4, seed=0)
    metrics = source.metrics()
    admitted = sum(v for k, v in metrics.items() if k.startswith("gen_admitted_"))
    assert metrics["gen_admitted_split"] == 6 and admitted == metrics["pool_tasks"] == len(source.pool)
    assert all(isinstance(v, int) for k, v in metrics.items() if k.startswith("gen_"))
