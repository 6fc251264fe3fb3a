"""Validation of tasks against their task space: parameter checks, canonical form, held-out
checks, and whether the oracle's plan solves a task. Functions taking the space; a family
customises them through the optional hooks named in `agentgym.tasks.protocol`."""

from __future__ import annotations

from agentgym.errors import TaskParamError
from agentgym.tasks.protocol import family_hook, split_tasks
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import HELDOUT_SPLITS
from agentgym.tasks.splits import is_heldout as _is_heldout


def check_params(space, params: dict) -> dict:
    """The family's canonical params (its `check_params` hook: types fixed, e.g. a float knob given
    as an int becomes a float) or a ValueError/TypeError naming the problem. Runs before anything is
    built or any file touched. Without the hook any JSON params are accepted."""
    hook = family_hook(space, "check_params")
    return hook(params) if hook is not None else dict(params)


def reserved_rule(space):
    """The family's `reserved(spec)` region rule, or None when it keeps no region for held-out."""
    return family_hook(space, "reserved")


def is_reserved(space, spec: TaskSpec) -> bool:
    """Whether `spec` lies in a region kept for held-out evaluation (products, goal pairs,
    projects): refused for training whatever its id."""
    rule = reserved_rule(space)
    return bool(rule(spec)) if rule is not None else False


def canonical(space, spec: TaskSpec) -> TaskSpec:
    """`spec` checked and in canonical form (this family's env id, validated params), so equal
    games have equal task ids; TaskParamError (one line: what is wrong and what to do) otherwise."""
    env_id = space.env_id
    if not isinstance(spec, TaskSpec):
        raise TaskParamError(f"expected a TaskSpec for {env_id}, got {type(spec).__name__}")
    if _bare(spec.env_id) != _bare(env_id):
        raise TaskParamError(
            f"this task is for {spec.env_id}, not {env_id}: make that environment, or pick a task from "
            f"`agentgym tasks list {env_id}`")
    try:
        params = check_params(space, dict(spec.params))
    except (ValueError, TypeError, KeyError) as exc:
        msg = str(exc).strip("'\"") if isinstance(exc, KeyError) else str(exc)
        raise TaskParamError(
            f"invalid {env_id} task params: {msg.splitlines()[0] if msg else type(exc).__name__}; "
            f"see `agentgym tasks list {env_id}` for valid tasks") from None
    return TaskSpec(env_id, params=params, seed=spec.seed)


def heldout_ids(space) -> set[str]:
    """The ids of the tasks in the space's held-out splits."""
    own = family_hook(space, "heldout_ids")  # a space that answers this itself (no split manifests)
    return set(own()) if own is not None else split_heldout_ids(space)


def split_heldout_ids(space) -> set[str]:
    """The ids of the tasks `read_split` gives for the held-out split names (`heldout_ids`' default)."""
    ids: set[str] = set()
    for name in space.split_names:
        if name in HELDOUT_SPLITS:
            ids.update(t.task_id for t in split_tasks(space, name))
    return ids


def heldout_keys(space) -> set[str]:
    """The held-out tasks' ids and their `content_key`s (which ignore the env id and number types),
    so relabelled or re-typed copies are caught too: what the generator, the task sources and the
    trainer refuse. Cached on the space."""
    own = family_hook(space, "heldout_keys") or family_hook(space, "heldout_ids")
    return set(own()) if own is not None else split_heldout_keys(space)


def split_heldout_keys(space) -> set[str]:
    """Ids and content keys of the held-out splits' tasks (`heldout_keys`' default), cached on the space."""
    cache = getattr(space, "__dict__", None)
    cached = cache.get("_heldout_keys") if cache is not None else None
    if cached is None:
        keys: set[str] = set()
        for name in space.split_names:
            if name in HELDOUT_SPLITS:
                for t in split_tasks(space, name):
                    keys.update((t.task_id, t.content_key))
        cached = frozenset(keys)
        if cache is not None:
            cache["_heldout_keys"] = cached
    return set(cached)


def is_heldout(space, spec: TaskSpec) -> bool:
    """Held out by id, by canonical content, by content with another env id, or by region."""
    keys, rule = heldout_keys(space), reserved_rule(space)
    if _is_heldout(spec, keys, rule):
        return True
    try:
        return _is_heldout(canonical(space, TaskSpec(space.env_id, spec.params, spec.seed)), keys, rule)
    except TaskParamError:
        return False


def make_env(space, **kwargs):
    """A bare env for the space (its `make_env` hook, else the class of its registered id built from
    the registered entry point and kwargs, no Gymnasium wrappers: cheap enough to validate thousands
    of proposals). Looked up by id, so task spaces never import their env's module."""
    hook = family_hook(space, "make_env")
    return hook(**kwargs) if hook is not None else registered_env(space.env_id, **kwargs)


def registered_env(env_id: str, **kwargs):
    """The bare env registered as `env_id` (entry point + registered kwargs, updated by `kwargs`)."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    spec = gym.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    return creator(**{**spec.kwargs, **kwargs})


def validate(space, spec: TaskSpec) -> bool:
    """Whether `spec` is a valid task: the family's `validate` hook, else `oracle_solves`."""
    hook = family_hook(space, "validate")
    return bool(hook(spec)) if hook is not None else oracle_solves(space, spec)


def oracle_solves(space, spec: TaskSpec) -> bool:
    """The oracle's plan solves `spec` in a fresh environment (the default validity check)."""
    try:
        plan = space.solve(spec)
    except (ValueError, KeyError, TypeError):
        return False
    if plan is None:
        return False
    env = make_env(space).unwrapped
    try:
        _, info = env.reset(options={"task": spec})
        for action in plan:
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        return bool(info["success"])
    except (ValueError, KeyError, TypeError):
        return False
    finally:
        env.close()


def check_schema(params: dict, required: dict, optional: dict | None = None, what: str = "task") -> dict:
    """Check `params` against {key: type or (types)}: unknown or missing keys and wrong types
    raise ValueError/TypeError naming them; a `float` key given an int becomes a float (so the
    same game has the same id); `bool` is never accepted as a number. Strings must not hold NUL
    bytes. The helper behind each family's `check_params`."""
    if not isinstance(params, dict):
        raise TypeError(f"{what} params must be an object, got {type(params).__name__}")
    optional = optional or {}
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; {what} params take {sorted(set(required) | set(optional))}")
    missing = sorted(set(required) - set(params))
    if missing:
        raise ValueError(f"missing keys {missing}")
    out = {}
    for key, value in params.items():
        want = required.get(key, optional.get(key))
        types = want if isinstance(want, tuple) else (want,)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in types:
            raise TypeError(f"{key} must be {' or '.join(t.__name__ for t in types)}, got {value!r}")
        if not isinstance(value, types):
            raise TypeError(f"{key} must be {' or '.join(t.__name__ for t in types)}, got {type(value).__name__}")
        if isinstance(value, str) and "\x00" in value:
            raise ValueError(f"{key} contains a NUL byte")
        out[key] = value
    return out


def _bare(env_id: str) -> str:
    """The id without the default namespace: `Household-v0` and `agentgym/Household-v0` agree."""
    return env_id[len("agentgym/"):] if isinstance(env_id, str) and env_id.startswith("agentgym/") else env_id
