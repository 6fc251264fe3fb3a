"""Issue 19: task validation, canonical ids, held-out refusal by content and region, and clear
reset errors. Each test failed on the code before the fix."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import agentgym  # noqa: F401
from agentgym.errors import HeldoutTaskError, TaskParamError
from agentgym.registration import get_task_space
from agentgym.tasks.generator import TaskGenerator
from agentgym.tasks.pool import TaskPool
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import refuse_heldout
from agentgym.tasks.validation import canonical, heldout_keys, is_heldout
from agentgym.tasks import validation as _validation

CHEAP = ["agentgym/Household-v0", "agentgym/WebShop-v0", "agentgym/ToolUse-v0", "agentgym/SearchQA-v0",
         "agentgym/SWE-v0"]


@pytest.mark.parametrize("env_id", CHEAP)
def test_shipped_tasks_are_already_canonical_and_train_is_not_heldout(env_id):
    space = get_task_space(env_id)
    for name in space.split_names:
        for t in space.split(name)[:300]:
            assert canonical(space, t).task_id == t.task_id, (name, t.params)
    held = heldout_keys(space)
    for t in space.split("train")[:300]:
        assert not is_heldout(space, t), t.params
        assert t.content_key not in held


def test_household_int_closed_fraction_is_the_same_task_and_refused():
    space = get_task_space("agentgym/Household-v0")
    task = next(t for t in space.split("heldout") if float(t.params["closed_fraction"]).is_integer())
    retyped = TaskSpec(task.env_id, dict(task.params, closed_fraction=int(task.params["closed_fraction"])), task.seed)
    assert retyped.task_id != task.task_id  # the raw id differs ...
    assert canonical(space, retyped).task_id == task.task_id  # ... the canonical one does not
    gen = TaskGenerator(space, TaskPool(), seed=0)
    assert gen.admit(retyped, "llm") == "heldout"
    with pytest.raises(HeldoutTaskError):
        refuse_heldout([retyped], heldout_keys(space))


def test_tasks_file_with_retyped_heldout_task_is_refused(tmp_path):
    from agentgym.tasks.splits import save_split
    from agentgym.trainers.config import TrainConfig
    from agentgym.trainers.task_selection import select_train_tasks

    space = get_task_space("agentgym/Household-v0")
    task = next(t for t in space.split("heldout") if float(t.params["closed_fraction"]).is_integer())
    retyped = TaskSpec(task.env_id, dict(task.params, closed_fraction=int(task.params["closed_fraction"])), task.seed)
    path = tmp_path / "mine.jsonl"
    save_split(path, [retyped])
    cfg = TrainConfig()
    cfg.env = dataclasses.replace(cfg.env, id="agentgym/Household-v0", tasks_file=str(path), fresh_tasks=0)
    with pytest.raises(HeldoutTaskError):
        select_train_tasks(cfg.env, space, cfg.seed)


def test_refuse_heldout_catches_tasks_relabelled_with_another_env_id():
    space = get_task_space("agentgym/Household-v0")
    task = space.split("heldout")[0]
    for other in ("agentgym/WebShop-v0", "Household-v0", "my/Env-v0"):
        relabelled = TaskSpec(other, dict(task.params), task.seed)
        with pytest.raises(HeldoutTaskError):
            refuse_heldout([relabelled], heldout_keys(space))
        assert is_heldout(space, relabelled)


def test_webshop_generator_never_admits_heldout_target_products():
    space = get_task_space("agentgym/WebShop-v0")
    gen = TaskGenerator(space, TaskPool(), seed=0, weights={"sample": 1.0},
                        sample_kwargs={"heldout_products": None})
    rng = np.random.default_rng(0)
    admitted = gen.propose(40)
    assert admitted and not any(_validation.is_reserved(space, t) for t in admitted)
    # a held-out task's exact product with a new seed and phrasing: refused by region
    for t in space.split("heldout")[:20]:
        assert gen.admit(TaskSpec(t.env_id, dict(t.params), int(rng.integers(1 << 30))), "llm") in ("reserved",
                                                                                                   "heldout")


@pytest.mark.parametrize("env_id,params,needle", [
    ("agentgym/Household-v0", {"task_type": "pick_and_place", "bogus": 1}, "unknown"),
    ("agentgym/WebShop-v0", {"asin": 3}, "keys"),
    ("agentgym/SWE-v0", {"repo": "datekit", "file": "../../etc/passwd"}, "keys"),
    ("agentgym/ToolUse-v0", {"template": "x", "level": "2"}, "level"),
    ("agentgym/SearchQA-v0", {"world_seed": 0, "rm -rf": 1}, "unknown"),
])
def test_each_family_validator_rejects_unknown_keys_and_wrong_types(env_id, params, needle):
    space = get_task_space(env_id)
    with pytest.raises(TaskParamError) as exc:
        canonical(space, TaskSpec(env_id, params))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_swe_validator_refuses_paths_even_with_every_key():
    space = get_task_space("agentgym/SWE-v0")
    task = space.split("train")[0]
    for bad in ("../../x", "/etc/passwd", "datekit/../../x", "tests/test_datekit_basic.py"):
        with pytest.raises(TaskParamError):
            canonical(space, TaskSpec(task.env_id, dict(task.params, file=bad), task.seed))


@pytest.mark.parametrize("options,needle", [
    ({"task": {}}, "env_id"),
    ("notadict", "dict"),
    ({"tsk": "abc"}, "unknown reset options"),
    ({"task": TaskSpec("agentgym/WebShop-v0", {"asin": "B0"})}, "WebShop"),
    ({"task": TaskSpec("agentgym/Household-v0", {"task_type": "pick_and_place", "objekt": "apple"})}, "unknown"),
    ({"task": 3.5}, "TaskSpec"),
])
def test_reset_errors_are_one_line_and_say_what_to_do(options, needle):
    env = gym.make("agentgym/Household-v0").unwrapped
    with pytest.raises(TaskParamError) as exc:
        env.reset(options=options)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg
    assert any(w in msg for w in ("pass", "use", "make", "see", "the only option", "such as")), msg
