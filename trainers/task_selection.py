"""Which tasks a run trains and evaluates on: the train split filtered by the config's params and
categories (held-out ids refused), a task file, or fresh tasks from the env's generator."""

from __future__ import annotations

from pathlib import Path

from agentgym.errors import ConfigError
from agentgym.trainers.config import TrainConfig


def select_train_tasks(cfg: TrainConfig, space) -> list:
    from agentgym.tasks.generation import fresh_tasks
    from agentgym.tasks.validation import heldout_keys, reserved_rule
    from agentgym.tasks.splits import load_split, refuse_heldout

    if cfg.env.fresh_tasks:
        def keep(spec) -> bool:
            return bool(filter_tasks([spec], cfg.env.task_filter, cfg.env.categories, space))

        tasks = fresh_tasks(space, int(cfg.env.fresh_tasks), seed=cfg.seed, keep=keep)
    else:
        tasks = load_split(cfg.env.tasks_file) if cfg.env.tasks_file else space.split(cfg.env.split)
        tasks = filter_tasks(tasks, cfg.env.task_filter, cfg.env.categories, space)
    refuse_heldout(tasks, heldout_keys(space), what="training", reserved=reserved_rule(space))
    if cfg.env.max_tasks:
        tasks = tasks[: cfg.env.max_tasks]
    if not tasks:
        raise ConfigError(f"no training tasks left after env.task_filter={cfg.env.task_filter} and "
                          f"env.categories={cfg.env.categories}: loosen the filter")
    return tasks


def filter_tasks(tasks: list, task_filter: dict, categories: list | None = None, space=None) -> list:
    """Keep tasks whose params match (a scalar must be equal, a list lists the allowed values)
    and whose task_space.category matches one of the `categories` globs (when given)."""
    from fnmatch import fnmatch

    def ok(task) -> bool:
        if categories and not any(fnmatch(space.category(task), pattern) for pattern in categories):
            return False
        for key, want in task_filter.items():
            have = task.params.get(key)
            if isinstance(want, list) and have not in want:
                return False
            if not isinstance(want, list) and have != want:
                return False
        return True

    return [t for t in tasks if ok(t)]


def write_eval_tasks(cfg: TrainConfig, space, run_dir: Path) -> Path:
    """The held-out tasks of this run (same filter as training), as a manifest for evaluate()."""
    from agentgym.tasks.splits import save_split

    tasks = filter_tasks(space.split(cfg.eval.split), cfg.env.task_filter, cfg.env.categories, space)
    tasks = tasks[: cfg.eval.num_tasks]
    if not tasks:
        raise ConfigError(f"no {cfg.eval.split} tasks match env.task_filter={cfg.env.task_filter}")
    path = run_dir / f"eval_{cfg.eval.split}.jsonl"
    save_split(path, tasks)
    return path
