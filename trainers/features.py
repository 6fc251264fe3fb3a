"""User environments in `agentgym train`: importing the modules that register them, and one
clear error naming every env feature a config needs that the env's task space lacks.

    agentgym train my.yaml --import mypkg.envs env.id=mypkg/Maze-v0
    # or in the YAML:  imports: [mypkg.envs]   and, in a preset:  env: {requires: [...]}
"""

from __future__ import annotations

import importlib

from agentgym.errors import ConfigError

# feature -> (what it is, how to tell the task space has it)
FEATURES = {
    "oracle": ("an oracle `solve(spec)` (SFT warm start, validation)", lambda s: _overrides(s, "solve")),
    "fresh_tasks": ("a generator `sample(rng)` (env.fresh_tasks, the evolving task source)",
                    lambda s: _overrides(s, "sample")),
    "categories": ("`category(spec)` (env.categories, curricula, reports)", lambda s: _overrides(s, "category")),
    "searching_oracle": ("a searching oracle `solve_searching(spec, rng)` (sft.expert=searching)",
                         lambda s: callable(getattr(s, "solve_searching", None))),
    "heldout_splits": ("held-out split manifests (eval.split)", lambda s: _has_heldout(s)),
}


def _overrides(space, name: str) -> bool:
    from agentgym.tasks.space import TaskSpace

    method = getattr(type(space), name, None)
    return method is not None and method is not getattr(TaskSpace, name, None)


def _has_heldout(space) -> bool:
    try:
        return bool(space.heldout_ids())
    except Exception:
        return False


def import_modules(names) -> None:
    """Import each module (they register their envs when imported); a clear error if one is missing."""
    for name in names or []:
        try:
            importlib.import_module(str(name))
        except ImportError as exc:
            raise ConfigError(f"cannot import {name!r} (from --import / imports): {exc}; check the module name "
                              "and that its folder is on PYTHONPATH") from None


def required_features(cfg) -> list[str]:
    """What the config needs: the env's declared `requires` plus what its settings imply."""
    need = list(getattr(cfg.env, "requires", None) or [])
    if cfg.env.fresh_tasks:
        need.append("fresh_tasks")
    if cfg.env.categories:
        need.append("categories")
    if cfg.sft.enabled:
        need.append("searching_oracle" if cfg.sft.expert == "searching" else "oracle")
    unknown = sorted(set(need) - set(FEATURES))
    if unknown:
        raise ConfigError(f"env.requires names unknown features {unknown}; known: {', '.join(FEATURES)}")
    return list(dict.fromkeys(need))


def check_env_features(cfg, space) -> None:
    """One error listing every missing feature (not one per run attempt)."""
    missing = [f for f in required_features(cfg) if not FEATURES[f][1](space)]
    if missing:
        what = "; ".join(f"{f}: {FEATURES[f][0]}" for f in missing)
        raise ConfigError(f"{cfg.env.id} lacks what this config needs -- {what}. Implement them on its TaskSpace, "
                          "or switch them off (env.fresh_tasks=0, env.categories=[], sft.enabled=false / "
                          "sft.expert=oracle)")
