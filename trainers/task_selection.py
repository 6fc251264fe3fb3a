"""Which tasks a run trains and evaluates on: the train split filtered by the config's params and
categories (held-out ids refused), a task file, or fresh tasks from the env's generator."""

from __future__ import annotations

import weakref
from pathlib import Path

from agentgym.errors import ConfigError
from agentgym.trainers.config import EnvConfig, EvalConfig
from agentgym.tasks.generation import fresh_tasks
from agentgym.tasks.validation import heldout_keys, reserved_rule
from agentgym.tasks.splits import load_split, refuse_heldout
from agentgym.tasks.splits import save_split


def select_train_tasks(env_cfg: EnvConfig, space, seed: int) -> list:
    """The training tasks env_cfg names: fresh tasks (drawn with `seed`), a task file or the split,
    filtered by env.task_filter / env.categories, held-out ids refused."""

    if env_cfg.fresh_tasks:
        tasks = _fresh_draw(env_cfg, space, seed)
    else:
        tasks = load_split(env_cfg.tasks_file) if env_cfg.tasks_file else space.split(env_cfg.split)
        tasks = filter_tasks(tasks, env_cfg.task_filter, env_cfg.categories, space)
    refuse_heldout(tasks, heldout_keys(space), what="training", reserved=reserved_rule(space))
    if env_cfg.max_tasks:
        tasks = tasks[: env_cfg.max_tasks]
    if not tasks:
        raise ConfigError(f"no training tasks left after env.task_filter={env_cfg.task_filter} and "
                          f"env.categories={env_cfg.categories}: loosen the filter")
    return tasks


# A run draws its fresh tasks twice (the SFT warm start and the RL loop), seconds each: the draw is
# deterministic in (space, count, filter, seed), so the second is the first's list, while the space lives.
_FRESH_DRAWS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _fresh_draw(env_cfg: EnvConfig, space, seed: int) -> list:
    def keep(spec) -> bool:
        return bool(filter_tasks([spec], env_cfg.task_filter, env_cfg.categories, space))

    key = (int(env_cfg.fresh_tasks), repr(env_cfg.task_filter), repr(env_cfg.categories), int(seed))
    try:
        drawn = _FRESH_DRAWS.setdefault(space, {})
    except TypeError:  # a space that takes no weak reference: drawn every time
        drawn = {}
    if key not in drawn:
        drawn[key] = fresh_tasks(space, key[0], seed=seed, keep=keep)
    return list(drawn[key])


def filter_tasks(tasks: list, task_filter: dict, categories: list | None = None, space=None) -> list:
    """Keep tasks whose params match (a scalar must be equal, a list lists the allowed values)
    and whose task_space.category matches one of the `categories` globs (when given)."""
    from fnmatch import fnmatch

    def ok(task) -> bool:
        if categories:
            category = space.category(task)  # once, not once a pattern
            if not any(fnmatch(category, pattern) for pattern in categories):
                return False
        for key, want in task_filter.items():
            have = task.params.get(key)
            if isinstance(want, list) and have not in want:
                return False
            if not isinstance(want, list) and have != want:
                return False
        return True

    return [t for t in tasks if ok(t)]


def write_eval_tasks(eval_cfg: EvalConfig, env_cfg: EnvConfig, space, run_dir: Path) -> Path:
    """The held-out tasks of this run (same filter as training), as a manifest for evaluate()."""

    tasks = filter_tasks(space.split(eval_cfg.split), env_cfg.task_filter, env_cfg.categories, space)
    tasks = tasks[: eval_cfg.num_tasks]
    if not tasks:
        raise ConfigError(f"no {eval_cfg.split} tasks match env.task_filter={env_cfg.task_filter}")
    path = run_dir / f"eval_{eval_cfg.split}.jsonl"
    save_split(path, tasks)
    return path
