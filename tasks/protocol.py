"""The task-space protocol: what an environment family's task space must provide.

Written as a `typing.Protocol` so a family can implement it with any class (subclassing
`agentgym.tasks.TaskSpace` is the convenient way: it supplies `read_split` from shipped
manifests, `split` and `find`). Everything else the package does with a task space (validation,
held-out checks, the task generator's hooks) is a function in `agentgym.tasks.validation` or
`agentgym.tasks.generation` that takes the space.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from agentgym.tasks.spec import TaskSpec

#: The methods every task space implements (`REQUIRED_METHODS`), and the optional hooks a family
#: may define to customise the functions in `agentgym.tasks.validation` / `agentgym.tasks.generation`.
REQUIRED_METHODS = ("sample", "solve", "category", "read_split")
OPTIONAL_HOOKS = ("mutate", "difficulty", "describe", "parse", "build_splits",  # generation
                  "check_params", "reserved", "validate", "make_env",  # validation
                  "idle_commands")  # the trainer's credit diagnostics


@runtime_checkable
class TaskSpaceProtocol(Protocol):
    """The tasks of one environment family.

    Attributes:
        env_id: the registered environment id the tasks are for (e.g. ``"agentgym/Household-v0"``).
        split_names: the names `read_split` answers, e.g. ``("train", "heldout", "heldout_unseen")``;
            those in `agentgym.tasks.splits.HELDOUT_SPLITS` are never trained on.

    Required methods (the protocol):
        sample(rng, **difficulty) -> TaskSpec: a task drawn with `rng` (deterministic given it);
            keyword knobs narrow it (task type, level). Feeds fresh tasks and the task generator.
        solve(spec) -> list[str] | None: the oracle, a plan of actions that solves `spec` from its
            initial state, or None when unsolvable or the family has no oracle. Environments are
            deterministic given their TaskSpec, which is why the oracle is a plan.
        category(spec) -> str: a coarse bucket (task type x difficulty) for curricula and reports.
        read_split(name) -> Sequence[TaskSpec]: the tasks of split `name`; SplitFileError for a
            name not in `split_names`.

    Optional hooks (define a method of that name to change the default; call the functions, not
    the hooks):
        mutate(spec, rng) -> TaskSpec: a nearby variant (`generation.mutate`; no default).
        difficulty(spec) -> float: higher is harder (`generation.difficulty_fn`; default: none).
        describe() -> str: the tasks in words for LLM proposers (`generation.describe`).
        parse(text) -> TaskSpec | None: an LLM's proposal as a task (`generation.parse`; the
            default reads a JSON object, `generation.parse_json`).
        build_splits(**options) -> dict[str, list[TaskSpec]]: generate the shipped manifests
            (`generation.build_splits`).
        check_params(params) -> dict: canonical params or ValueError/TypeError
            (`validation.check_params`; default: any JSON params).
        reserved(spec) -> bool: the task lies in a region kept for held-out evaluation
            (`validation.is_reserved`; default: no region).
        validate(spec) -> bool: the task is well formed and solvable (`validation.validate`;
            default: the oracle's plan solves it in a fresh env, `validation.oracle_solves`).
        make_env(**kwargs): a bare env for validation (`validation.make_env`; default: the
            registered entry point of `env_id`).
        teacher(spec) -> Teacher: a fresh stepwise expert for one episode of `spec`, which answers
            in any state an agent reaches (DAgger relabels a policy's own episodes with it,
            sft.dagger; `Teacher` below). The plan of `solve` only answers from the start.
        idle_commands: tuple[str, ...]: prefixes of valid commands that change nothing in the
            world (household's look / inventory / examine); the trainer's credit diagnostics count
            such steps as idle (`idle_commands(space)`; default: none, every valid step is useful).
    """

    env_id: str
    split_names: tuple[str, ...]

    def sample(self, rng: np.random.Generator, **difficulty: Any) -> TaskSpec: ...

    def solve(self, spec: TaskSpec) -> list[str] | None: ...

    def category(self, spec: TaskSpec) -> str: ...

    def read_split(self, name: str) -> Sequence[TaskSpec]: ...


@runtime_checkable
class Teacher(Protocol):
    """One episode's expert, fed the episode as the agent plays it: `act` is the command the
    expert would send in the state shown (`observation` and `info` as the env returned them, with
    info["admissible_actions"] where the env lists them); `observe` records the command the agent
    actually sent and the observation that followed (only for valid commands)."""

    def act(self, observation: str, info: dict) -> str: ...

    def observe(self, action: str, observation: str, info: dict) -> None: ...


def idle_commands(space) -> tuple[str, ...]:
    """The space's `idle_commands` (lower-case command prefixes), or () when it declares none."""
    return tuple(getattr(space, "idle_commands", None) or ())


def default_hook(fn):
    """Mark a base-class method as the default of an optional hook (not a family's override)."""
    fn.__agentgym_default_hook__ = True
    return fn


def family_hook(space, name: str):
    """The family's own `name` hook on `space` (bound), or None when it defines none (only the
    base class's default, or nothing at all for a duck-typed space)."""
    attr = getattr(space, name, None)
    if attr is None or getattr(attr, "__agentgym_default_hook__", False):
        return None
    return attr


def split_tasks(space, name: str) -> Sequence[TaskSpec]:
    """The tasks of split `name`, honouring a (deprecated) `_splits` override of older spaces."""
    old = getattr(space, "_splits", None)
    return old(name) if old is not None else space.read_split(name)
