import json

import numpy as np
import pytest

import agentgym
from agentgym.errors import AgentGymError, ConfigError
from agentgym.policies import Completion, OraclePolicy
from agentgym.registration import get_task_space
from agentgym.tasks.generator import TaskGenerationError, TaskGenerator
from agentgym.tasks.pool import TaskPool
from agentgym.tasks.spec import TaskSpec
from agentgym.toy import COUNTER_ID
from agentgym.tasks.generation import describe
from agentgym.tasks.validation import heldout_ids

HOUSEHOLD = "agentgym/Household-v0"


def test_ten_thousand_generated_tasks_never_include_a_heldout_id(counter_space):
    heldout = heldout_ids(counter_space)
    assert len(heldout) == 10_000
    pool = TaskPool()
    gen = TaskGenerator(counter_space, pool, seed=0, weights={"sample": 1.0, "mutate": 1.0})
    gen.seed_from(counter_space.split("train") + counter_space.split("heldout")[:50])
    for task in pool.active():  # some rollouts so that mutation has a frontier to work from
        pool.record(task.task_id, 1, 2)
    emitted = gen.propose(10_000)
    assert len(emitted) == 10_000 and len({t.task_id for t in emitted}) == 10_000
    assert not {t.task_id for t in emitted} & heldout
    assert not set(pool.entries) & heldout
    # the generator was offered held-out tasks many times and refused every one
    assert gen.stats["rejected/heldout"] > 500
    assert gen.stats["admitted/mutate"] > 0 and gen.stats["admitted/sample"] > 5000


def test_every_pool_task_is_oracle_valid(counter_space):
    pool = TaskPool()
    gen = TaskGenerator(counter_space, pool, seed=1)
    gen.propose(200)
    # replay the oracle through the rollout engine, independently of TaskSpace.validate
    specs = [e.spec for e in pool.entries.values()]
    trajs = agentgym.collect(COUNTER_ID, specs, OraclePolicy(counter_space), group_size=1)
    assert all(t.success for t in trajs)


def test_household_pool_tasks_are_oracle_valid_and_never_held_out():
    space = get_task_space(HOUSEHOLD)
    pool = TaskPool()
    gen = TaskGenerator(space, pool, seed=2)
    gen.seed_from(space.split("train")[:40])
    rng = np.random.default_rng(0)
    for e in pool.active():  # a spread of estimates: frontier, always failed, always solved
        pool.record(e.task_id, *[(0, 6), (3, 6), (6, 6)][int(rng.integers(3))])
    new = gen.propose(300)
    assert not {t.task_id for t in new} & heldout_ids(space)
    from agentgym.envs.household.tasks import is_reserved  # nor a heldout_unseen (object, destination) pair

    assert not any(is_reserved(t.params["object"], t.params.get("lamp") or t.params.get("receptacle")) for t in new)
    assert {gen.stats[f"admitted/{s}"] > 0 for s in ("sample", "mutate", "easier", "harder")} == {True}
    sample = [pool.entries[t.task_id].spec for t in new[::10]]
    trajs = agentgym.collect(HOUSEHOLD, sample, OraclePolicy(space), group_size=1)
    assert all(t.success for t in trajs)


def test_easier_and_harder_variants_move_difficulty_the_right_way():
    from agentgym.envs.household.tasks import difficulty

    space = get_task_space(HOUSEHOLD)
    for source, sign in (("easier", -1), ("harder", 1)):
        pool = TaskPool()
        gen = TaskGenerator(space, pool, seed=3, weights={source: 1.0})
        parent = space.sample(np.random.default_rng(4), level="medium")
        gen.seed_from([parent])
        pool.record(parent.task_id, 0 if source == "easier" else 8, 8)
        for child in gen.propose(3):  # one parent has only a few strictly easier / harder neighbours
            entry = pool.entries[child.task_id]
            assert entry.origin == source and entry.parent == parent.task_id
            assert sign * (difficulty(child.params) - difficulty(parent.params)) > 0


def test_mutations_come_from_frontier_tasks_only(counter_space):
    pool = TaskPool()
    gen = TaskGenerator(counter_space, pool, seed=5, weights={"mutate": 1.0}, frontier=(0.3, 0.7))
    tasks = [TaskSpec(COUNTER_ID, {"target": t}, seed=7) for t in (2, 3, 4)]
    gen.seed_from(tasks)
    pool.record(tasks[0].task_id, 5, 10)  # mean 0.5: frontier
    pool.record(tasks[1].task_id, 0, 10)  # mean 1/12: not
    gen.propose(1)  # target 2 -> 1 or 3, and 3 is known: so mutation gives target 1, or the sample fallback
    mutated = [e for e in pool.entries.values() if e.origin == "mutate"]
    assert all(e.parent == tasks[0].task_id for e in mutated)


class CannedLLM:
    """Test double for an LLM proposer: returns the given texts in turn (and records prompts)."""

    def __init__(self, texts):
        self.texts, self.prompts = list(texts), []

    def generate(self, prompts, sampling=None, contexts=None):
        self.prompts.extend(prompts)
        out = []
        for _ in prompts:
            text = self.texts.pop(0) if self.texts else "I have no more ideas."
            out.append(Completion(text=text, finish_reason="error", error="backend down") if text is None
                       else Completion(text=text))
        return out


def test_llm_proposals_are_parsed_validated_and_bad_ones_counted():
    space = get_task_space(HOUSEHOLD)
    heldout_task = space.split("heldout")[0]
    broken = dict(space.split("train")[0].params, num_receptacles=99)
    texts = [
        "put a hot apple in fridge. level=easy",  # words: parses and validates
        json.dumps({"params": dict(space.split("train")[1].params), "seed": 5}),  # JSON: parses
        "let us bake a cake together",  # does not parse
        json.dumps(heldout_task.to_dict()),  # a held-out task: refused
        json.dumps({"params": broken, "seed": 1}),  # parse refuses impossible knobs
        None,  # backend error
        "put a hot apple in fridge. level=easy",  # the same proposal again: a duplicate
        "put a hot apple in drawer. level=easy",  # (apple, drawer) is reserved for heldout_unseen
        json.dumps({"params": dict(space.split("train")[1].params), "seed": 6}),
    ]
    llm = CannedLLM(texts)
    pool = TaskPool()
    gen = TaskGenerator(space, pool, seed=0, llm=llm, weights={"llm": 1.0}, llm_batch=4)
    gen.recent.append({"task_id": "x", "instruction": "put a clean mug in coffeemachine.", "success": False,
                       "steps": 30})
    new = gen.propose(3)
    assert [pool.entries[t.task_id].origin for t in new] == ["llm"] * 3
    assert new[0].params["task_type"] == "pick_heat_then_place" and new[0].params["object"] == "apple"
    assert gen.stats["rejected/unparsed"] == 2  # the cake and the knob out of range
    assert gen.stats["rejected/heldout"] == 1
    assert gen.stats["rejected/duplicate"] == 1
    assert gen.stats["rejected/reserved"] == 1
    assert gen.stats["llm/errors"] == 1
    prompt = llm.prompts[0][-1]["content"]
    assert describe(space)[:40] in prompt and "put a clean mug in coffeemachine." in prompt


def test_a_task_space_without_valid_tasks_raises_instead_of_looping(counter_space):
    class NeverValid(type(counter_space)):
        def validate(self, spec):
            return False

    gen = TaskGenerator(NeverValid(), TaskPool(), seed=0, max_consecutive_rejects=50)
    with pytest.raises(TaskGenerationError, match="no valid new task in 50 proposals in a row") as err:
        gen.propose(1)
    assert isinstance(err.value, AgentGymError) and "invalid" in str(err.value)
    assert gen.stats["rejected/invalid"] + gen.stats["rejected/heldout"] == 50  # 10% of samples are held out


def test_an_llm_that_never_proposes_anything_valid_hits_the_bound():
    gen = TaskGenerator(get_task_space(HOUSEHOLD), TaskPool(), seed=0, llm=CannedLLM([]),
                        weights={"llm": 1.0}, max_consecutive_rejects=20)
    with pytest.raises(TaskGenerationError, match="unparsed"):
        gen.propose(1)
    assert gen.stats["rejected/unparsed"] == 20


def test_a_crashing_sampler_is_reported(counter_space):
    gen = TaskGenerator(counter_space, TaskPool(), seed=0, sample_kwargs={"max_target": 0},
                        max_consecutive_rejects=10)
    with pytest.raises(TaskGenerationError, match="last error: sample raised ValueError"):
        gen.propose(1)


def test_generator_state_round_trips(counter_space):
    a = TaskGenerator(counter_space, TaskPool(), seed=9)
    a.propose(30)
    state = json.loads(json.dumps({"gen": a.state_dict(), "pool": a.pool.state_dict()}))
    pool = TaskPool()
    pool.load_state_dict(state["pool"])
    b = TaskGenerator(counter_space, pool, seed=123)
    b.load_state_dict(state["gen"])
    assert [t.task_id for t in a.propose(20)] == [t.task_id for t in b.propose(20)]
    assert a.stats == b.stats


def test_bad_generator_options():
    space = get_task_space(HOUSEHOLD)
    with pytest.raises(ConfigError, match="unknown generator sources"):
        TaskGenerator(space, TaskPool(), weights={"dream": 1.0})
    with pytest.raises(ConfigError, match="unknown task generator option"):
        TaskGenerator(space, TaskPool(), colour="red")
    with pytest.raises(ConfigError, match="frontier"):
        TaskGenerator(space, TaskPool(), frontier=(0.9, 0.1))
