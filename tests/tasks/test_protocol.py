"""The task-space protocol is four methods (sample, solve, category, read_split); validation and
the generator's hooks are functions in agentgym.tasks.validation / agentgym.tasks.generation that
take the space. The old TaskSpace methods keep working for one release and warn, naming the
function; a family defined outside the package (subclass or duck-typed) works with the functions."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from agentgym import registration
from agentgym.errors import TaskParamError
from agentgym.registration import get_task_space, register_env
from agentgym.tasks import generation, validation
from agentgym.tasks.generator import TaskGenerator
from agentgym.tasks.pool import TaskPool
from agentgym.tasks.protocol import REQUIRED_METHODS, TaskSpaceProtocol
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec
from agentgym.toy import COUNTER_ID, CounterEnv, CounterTaskSpace, register_counter

register_counter()
OUTSIDE_ID = "agentgym/OutsideCounter-v0"


def test_the_protocol_is_sample_solve_category_and_read_split():
    assert REQUIRED_METHODS == ("sample", "solve", "category", "read_split")
    for name in REQUIRED_METHODS:
        assert callable(getattr(TaskSpaceProtocol, name))
        assert name in TaskSpaceProtocol.__doc__
    assert {"env_id", "split_names"} <= set(TaskSpaceProtocol.__annotations__)


@pytest.mark.parametrize("env_id", ["agentgym/Household-v0", "agentgym/SearchQA-v0", "agentgym/ToolUse-v0",
                                    "agentgym/Briefing-v0", COUNTER_ID])
def test_every_family_implements_the_protocol(env_id):
    assert isinstance(get_task_space(env_id), TaskSpaceProtocol)


def test_a_class_missing_a_required_method_is_not_a_task_space():
    class NoOracle:
        env_id, split_names = "x", ("train",)

        def sample(self, rng): ...
        def category(self, spec): ...
        def read_split(self, name): ...

    assert not isinstance(NoOracle(), TaskSpaceProtocol)


class _Bare(TaskSpace):
    """A family with only the protocol: every optional hook takes its default."""

    env_id = COUNTER_ID
    split_names = ("train", "heldout")

    def sample(self, rng, **_):
        return TaskSpec(self.env_id, {"target": int(rng.integers(1, 4))}, seed=int(rng.integers(1 << 20)))

    def solve(self, spec):
        return ["inc"] * int(spec.params["target"])

    def category(self, spec):
        return "all"

    def read_split(self, name):
        return {"train": (TaskSpec(self.env_id, {"target": 1}, seed=1),),
                "heldout": (TaskSpec(self.env_id, {"target": 2}, seed=7),)}[name]


TRAIN, HELD = _Bare().read_split("train")[0], _Bare().read_split("heldout")[0]

# (old method, its arguments, the new function, the function's module)
MOVED = [
    ("check_params", ({"target": 3},), validation.check_params, "validation"),
    ("reserved", (TRAIN,), validation.is_reserved, "validation"),
    ("canonical", (TRAIN,), validation.canonical, "validation"),
    ("is_heldout", (HELD,), validation.is_heldout, "validation"),
    ("heldout_ids", (), validation.heldout_ids, "validation"),
    ("heldout_keys", (), validation.heldout_keys, "validation"),
    ("validate", (TRAIN,), validation.validate, "validation"),
    ("describe", (), generation.describe, "generation"),
    ("parse", ('{"params": {"target": 2}, "seed": 3}',), generation.parse, "generation"),
    ("fresh_tasks", (2, 0), generation.fresh_tasks, "generation"),
]


@pytest.mark.parametrize("method,args,function,module", MOVED, ids=[m[0] for m in MOVED])
def test_each_moved_method_is_a_function_and_the_old_method_warns_and_agrees(method, args, function, module):
    space = _Bare()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the function itself is silent
        new = function(space, *args)
    name = function.__name__
    with pytest.warns(DeprecationWarning, match=rf"TaskSpace\.{method}\(\).*agentgym\.tasks\.{module}\.{name}\("):
        old = getattr(space, method)(*args)
    assert old == new


def test_the_moved_results_are_the_old_behaviour():
    space = _Bare()
    assert validation.check_params(space, {"target": 3}) == {"target": 3}
    assert validation.is_reserved(space, TRAIN) is False and validation.reserved_rule(space) is None
    assert validation.is_heldout(space, HELD) and not validation.is_heldout(space, TRAIN)
    assert validation.heldout_ids(space) == {HELD.task_id}
    assert validation.validate(space, TRAIN) and not validation.validate(space, TaskSpec(COUNTER_ID, {"goal": 2}))
    assert generation.describe(space) == _Bare.__doc__.strip()
    assert generation.parse(space, "no json") is None
    assert generation.parse(space, 'try {"params": {"target": 2}, "seed": 3}') == TaskSpec(COUNTER_ID, {"target": 2}, 3)
    assert generation.difficulty_fn(space) is None
    fresh = generation.fresh_tasks(space, 5, seed=1)
    assert len(fresh) == 5 and HELD.task_id not in {t.task_id for t in fresh}
    with pytest.raises(TaskParamError, match="not agentgym/Counter-v0"):
        validation.canonical(space, TaskSpec("agentgym/Other-v0", {"target": 1}))


@pytest.mark.parametrize("method,args,function", [("mutate", (TRAIN, np.random.default_rng(0)), generation.mutate),
                                                  ("build_splits", (), generation.build_splits)])
def test_hooks_without_a_default_say_so_from_the_function_and_the_old_method(method, args, function):
    with pytest.raises(NotImplementedError, match=f"defines no {method}"):
        function(_Bare(), *args)
    with pytest.warns(DeprecationWarning, match=f"agentgym.tasks.generation.{method}"), \
            pytest.raises(NotImplementedError, match=f"defines no {method}"):
        getattr(_Bare(), method)(*args)


def test_a_familys_own_hooks_are_what_the_functions_call_without_warning():
    space = CounterTaskSpace()  # defines mutate and build_splits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        variant = generation.mutate(space, TRAIN, np.random.default_rng(0))
        assert abs(variant.params["target"] - TRAIN.params["target"]) == 1
        assert generation.build_splits(space) == space.build_splits()
        assert space.mutate(TRAIN, np.random.default_rng(0)) == variant  # the family's own method: no warning


# --- a family defined outside the package -------------------------------------------------------
class OutsideSpace(TaskSpace):
    """Counter tasks of a user's package, with its own validation hooks."""

    env_id = OUTSIDE_ID
    split_names = ("train", "heldout")

    def sample(self, rng, **_):
        return TaskSpec(self.env_id, {"target": int(rng.integers(1, 7))}, seed=int(rng.integers(1 << 20)))

    def solve(self, spec):
        return ["inc"] * int(spec.params["target"])

    def category(self, spec):
        return "low" if spec.params["target"] <= 3 else "high"

    def read_split(self, name):
        if name not in self.split_names:
            return super().read_split(name)
        return {"train": [TaskSpec(self.env_id, {"target": t}, seed=0) for t in (1, 2, 3)],
                "heldout": [TaskSpec(self.env_id, {"target": t}, seed=9) for t in (1, 2)]}[name]

    def check_params(self, params):
        target = params["target"]
        if isinstance(target, bool) or not isinstance(target, int) or not 1 <= target <= 9:
            raise ValueError("target must be an int in 1..9")
        return {"target": target}

    def reserved(self, spec):
        return spec.params.get("target") == 6  # kept for held-out evaluation

    def parse(self, text):
        words = text.split()
        if len(words) == 2 and words[0] == "count":
            return TaskSpec(self.env_id, {"target": int(words[1])})
        return generation.parse_json(self, text)


class OutsideEnv(CounterEnv):
    task_space = OutsideSpace()


class DuckSpace:
    """A task space that only follows the protocol (no TaskSpace base class)."""

    env_id = OUTSIDE_ID
    split_names = ("train", "heldout")

    def sample(self, rng, **_):
        return TaskSpec(self.env_id, {"target": int(rng.integers(1, 5))}, seed=int(rng.integers(1 << 20)))

    def solve(self, spec):
        return ["inc"] * int(spec.params["target"])

    def category(self, spec):
        return "all"

    def read_split(self, name):
        return OutsideSpace().read_split(name)


@pytest.fixture
def outside_env():
    env_id = register_env(OUTSIDE_ID, OutsideEnv, max_episode_steps=12)
    yield env_id
    gym.registry.pop(env_id, None)
    registration._OURS.pop(env_id, None)
    registration._TASK_SPACES.pop(env_id, None)


def test_an_outside_family_works_with_the_functions_and_the_env_without_warnings(outside_env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        space = get_task_space(outside_env)
        assert isinstance(space, OutsideSpace) and isinstance(space, TaskSpaceProtocol)
        assert validation.check_params(space, {"target": 4}) == {"target": 4}
        with pytest.raises(TaskParamError, match="target must be an int"):
            validation.canonical(space, TaskSpec(outside_env, {"target": 12}))
        assert validation.is_heldout(space, TaskSpec(outside_env, {"target": 6}, seed=3))  # its region
        assert validation.is_heldout(space, TaskSpec(outside_env, {"target": 2}, seed=9))  # its heldout split
        assert generation.parse(space, "count 4") == TaskSpec(outside_env, {"target": 4})
        assert generation.describe(space).startswith("Counter tasks of a user's package")
        fresh = generation.fresh_tasks(space, 6, seed=0)
        assert all(t.params["target"] != 6 for t in fresh)
        assert all(validation.validate(space, t) for t in fresh)
        env = gym.make(outside_env)
        try:
            _, info = env.reset(options={"task": space.split("train")[2]})
            for action in space.solve(space.split("train")[2]):
                _, _, terminated, _, info = env.step(action)
            assert terminated and info["success"]
        finally:
            env.close()
        gen = TaskGenerator(space, TaskPool(), seed=0, weights={"sample": 1.0})
        assert gen.reserved is not None and gen.reserved(TaskSpec(outside_env, {"target": 6}))


def test_a_duck_typed_outside_space_works_with_the_functions(outside_env):
    space = DuckSpace()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(space, TaskSpaceProtocol)
        assert validation.heldout_ids(space) == {t.task_id for t in space.read_split("heldout")}
        assert validation.check_params(space, {"target": 2}) == {"target": 2}  # no hook: any JSON params
        assert validation.canonical(space, TaskSpec(outside_env, {"target": 2})).env_id == outside_env
        assert not validation.is_reserved(space, TaskSpec(outside_env, {"target": 6}))
        assert generation.describe(space).startswith("A task space that only follows the protocol")
        assert generation.parse(space, '{"target": 3}') == TaskSpec(outside_env, {"target": 3})
        assert len(generation.fresh_tasks(space, 3, seed=0)) == 3  # validated in the registered env


def test_an_override_calling_super_gets_the_default_with_a_warning_and_no_recursion():
    class Strict(_Bare):
        def check_params(self, params):
            return super().check_params({k: v for k, v in params.items() if k == "target"})

        def validate(self, spec):
            return spec.params.get("target", 0) < 3 and super().validate(spec)

        def parse(self, text):
            return super().parse(text.replace("'", '"'))

        def describe(self):
            return "Strict. " + super().describe()

    space = Strict()
    with pytest.warns(DeprecationWarning, match=r"TaskSpace\.validate\(\).*oracle_solves\(self"):
        assert validation.validate(space, TRAIN)
    assert not validation.validate(space, TaskSpec(COUNTER_ID, {"target": 3}))  # refused before super()
    with pytest.warns(DeprecationWarning, match=r"check_params"):
        assert validation.check_params(space, {"target": 2, "junk": 1}) == {"target": 2}
    with pytest.warns(DeprecationWarning, match=r"parse_json\(self"):
        assert generation.parse(space, "{'target': 2}") == TaskSpec(COUNTER_ID, {"target": 2})
    with pytest.warns(DeprecationWarning, match=r"docstring\(self"):
        assert generation.describe(space) == "Strict. agentgym/Counter-v0"  # no docstring of its own: the env id
