"""User environments in `agentgym train`: importing the modules that register them, fitting a
preset to what an env's task space provides (`--env`), and one clear error naming every env
feature a config needs that the env's task space lacks, with the overrides that work.

    agentgym train --env mypkg/Maze-v0 --import mypkg.envs      # the generic preset, fitted to the env
    agentgym train my.yaml --import mypkg.envs env.id=mypkg/Maze-v0
    # or in the YAML:  imports: [mypkg.envs]   and, in a preset:  env: {requires: [...]}
"""

from __future__ import annotations

from agentgym.chat import ChatConfig
from agentgym.errors import ConfigError
from agentgym.tasks.space import TaskSpace
from agentgym.registration import check_env_id, get_task_space
from agentgym.registration import import_modules  # noqa: F401  (moved there; this path kept one release)
from agentgym.trainers.config import TrainConfig, _read_yaml, load_config, parse_overrides
from agentgym.tasks.validation import heldout_ids

# feature -> (what it is, how to tell the task space has it)
FEATURES = {
    "oracle": ("an oracle `solve(spec)` (SFT warm start, validation)", lambda s: _overrides(s, "solve")),
    "fresh_tasks": ("a generator `sample(rng)` (env.fresh_tasks, the evolving task source)",
                    lambda s: _overrides(s, "sample")),
    "categories": ("`category(spec)` (env.categories, curricula, reports)", lambda s: _overrides(s, "category")),
    "searching_oracle": ("a searching oracle `solve_searching(spec, rng)` (sft.expert=searching)",
                         lambda s: callable(getattr(s, "solve_searching", None))),
    "teacher": ("a stepwise expert `teacher(spec)` that answers in any state (sft.dagger)",
                lambda s: callable(getattr(s, "teacher", None))),
    "heldout_splits": ("held-out split manifests (eval.split)", lambda s: _has_heldout(s)),
    "meta_tags": ("a meta-reasoning tag rule `meta_tag(action, earlier_actions)` (sft.tags)",
                  lambda s: callable(getattr(s, "meta_tag", None))),
}


def _overrides(space, name: str) -> bool:

    method = getattr(type(space), name, None)
    return method is not None and method is not getattr(TaskSpace, name, None)


def _has_heldout(space) -> bool:
    try:
        return bool(heldout_ids(space))
    except Exception:
        return False


def required_features(env_cfg, sft_cfg) -> list[str]:
    """What the config needs: the env's declared `requires` plus what its settings imply."""
    need = list(env_cfg.requires or [])
    if env_cfg.fresh_tasks:
        need.append("fresh_tasks")
    if env_cfg.categories:
        need.append("categories")
    if sft_cfg.enabled:
        need.append("searching_oracle" if sft_cfg.expert == "searching" else "oracle")
        if sft_cfg.tags:
            need.append("meta_tags")
        if sft_cfg.dagger.rounds:
            need.append("teacher")
    unknown = sorted(set(need) - set(FEATURES))
    if unknown:
        raise ConfigError(f"env.requires names unknown features {unknown}; known: {', '.join(FEATURES)}")
    return list(dict.fromkeys(need))


# feature -> the overrides that stop a config from needing it (the fix named when an env lacks it)
SWITCH_OFF = {
    "oracle": ["sft.enabled=false"],
    "fresh_tasks": ["env.fresh_tasks=0"],
    "categories": ["env.categories=[]"],
    "searching_oracle": ["sft.expert=oracle", "sft.dawdle_prob=0"],
    "heldout_splits": ["eval.split=train"],
    "meta_tags": ["sft.tags=false"],
    "teacher": ["sft.dagger.rounds=0"],
}


def check_env_features(env_cfg, sft_cfg, space) -> None:
    """One error listing every missing feature (not one per run attempt), with the overrides that
    switch them all off at once, env.requires included, and the generic alternative."""
    missing = [f for f in required_features(env_cfg, sft_cfg) if not FEATURES[f][1](space)]
    if missing:
        what = "; ".join(f"{f}: {FEATURES[f][0]}" for f in missing)
        fixes = [o for f in missing for o in SWITCH_OFF[f]]
        if set(missing) & set(env_cfg.requires or []):
            fixes.insert(0, "env.requires=[]")
        raise ConfigError(f"{env_cfg.id} lacks what this config needs -- {what}. Implement them on its TaskSpace, "
                          f"or add these overrides: {' '.join(fixes)}, or train it with the generic preset, fitted "
                          f"to what the env provides: agentgym train --env {env_cfg.id}")


# What a preset says about its own env (its step limit, task categories, demonstrator): left out
# when the preset trains another env with --env, so that env's own settings apply.
ENV_SPECIFIC = {"env": ("env_kwargs", "categories", "task_filter", "requires", "fresh_tasks", "tasks_file",
                        "max_tasks"),
                "sft": ("expert", "dawdle_prob")}


def _flat_keys(tree: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in tree.items():
        keys.add(prefix + key)
        if isinstance(value, dict):
            keys |= _flat_keys(value, f"{prefix}{key}.")
    return keys


def config_for_env(env_id: str, source: str = "generic", overrides: list[str] | None = None, log=print):
    """`agentgym train [SOURCE] --env ENV_ID`: the preset (or YAML file) SOURCE for another env.
    The preset's env-specific settings are left out (the env's own apply, e.g. its step limit),
    then every feature the env's task space lacks is switched off, unless an override asks for
    it (then check_env_features names what is missing). Each change is one logged line."""
    import agentgym  # noqa: F401  registers the built-in envs

    env_id = check_env_id(env_id)
    data = _read_yaml(source)
    preset_env = (data.get("env") or {}).get("id") or TrainConfig().env.id
    defaults = TrainConfig().to_dict()
    dropped = []
    if preset_env != env_id:
        for section, keys in ENV_SPECIFIC.items():
            for key in keys:
                value = (data.get(section) or {}).pop(key, None)
                if value is not None and value != defaults[section][key]:
                    dropped.append(f"{section}.{key}")
    data.setdefault("env", {})["id"] = env_id
    user = _flat_keys(parse_overrides(list(overrides or [])))
    given = parse_overrides(list(overrides or [])).get("env", {})
    if isinstance(given, dict) and given.get("id") not in (None, env_id) and check_env_id(given["id"]) != env_id:
        raise ConfigError(f"--env {env_id} and env.id={given['id']} name two envs: give one")
    if "name" not in user and data.get("name", "generic") == "generic":
        data["name"] = env_id.split("/")[-1]  # runs/MyEnv-v0
    cfg = load_config(data, overrides)
    if dropped:
        log(f"--env {env_id}: left out {source}'s settings for {preset_env}: {', '.join(dropped)} "
            "(the env's own apply; set them as overrides to keep them)")
    space = get_task_space(env_id)
    for note in fit_to_env(cfg, space, user):
        log(f"--env {env_id}: {note}")
    check_env_features(cfg.env, cfg.sft, space)  # what an override asked for and the env lacks: one line, now
    return cfg


def fit_to_env(cfg, space, user_keys: set[str] = frozenset()) -> list[str]:
    """Switch off, in place, what `cfg` asks of the env that its task space does not provide, except
    what the user set explicitly (`user_keys`, dotted). Returns one note per change."""
    has = {name: test(space) for name, (_, test) in FEATURES.items()}
    notes = []
    if cfg.sft.enabled and not has["oracle"] and "sft.enabled" not in user_keys:
        cfg.sft.enabled = False
        notes.append("no SFT warm start (its task space has no oracle solve(spec)); RL starts from "
                     + ("policy.model" if cfg.policy.model else "the tiny model"))
    if cfg.sft.expert == "searching" and not has["searching_oracle"] and "sft.expert" not in user_keys:
        cfg.sft.expert, cfg.sft.dawdle_prob = "oracle", 0.0
        notes.append("SFT demonstrator: the plain oracle (no solve_searching)")
    if cfg.env.fresh_tasks and not has["fresh_tasks"] and "env.fresh_tasks" not in user_keys:
        cfg.env.fresh_tasks = 0
        notes.append("training on its train split (no generator sample(rng) for fresh tasks)")
    if cfg.env.categories and not has["categories"] and "env.categories" not in user_keys:
        cfg.env.categories = []
        notes.append("every task category (its task space has no category(spec))")
    train_split = [] if cfg.env.fresh_tasks or cfg.env.tasks_file else space.split(cfg.env.split)
    if cfg.sft.enabled and has["fresh_tasks"] and 0 < len(train_split) < cfg.sft.num_tasks and \
            not user_keys & {"env.fresh_tasks", "env.tasks_file", "env.categories", "env.task_filter"}:
        cfg.env.fresh_tasks = cfg.sft.num_tasks
        notes.append(f"{cfg.env.fresh_tasks} fresh tasks from its generator (its {cfg.env.split} split has only "
                     f"{len(train_split)}, fewer than sft.num_tasks; env.fresh_tasks=0 keeps the split)")
    if not cfg.policy.model and cfg.tiny.build and cfg.env.chat == ChatConfig() and \
            not any(k == "env.chat" or k.startswith("env.chat.") for k in user_keys):
        # a model trained from scratch learns short prompts far faster; the bare action as reply, and
        # the admissible actions it already took marked "(tried)" so it can search without a history
        cfg.env.chat = ChatConfig(parser="raw", system_prompt="", history=1, memory=12, memory_style="marks")
        notes.append("short prompts for a tiny model (env.chat: parser=raw, no system prompt, history=1, tried "
                     "actions marked); set env.chat.* to choose")
    if not cfg.env.fresh_tasks and not cfg.env.tasks_file and not space.split(cfg.env.split):
        if not has["fresh_tasks"]:
            raise ConfigError(f"{cfg.env.id} has no {cfg.env.split} tasks: give its TaskSpace a {cfg.env.split!r} "
                              "split (build_splits / _splits) or a generator sample(rng), or pass "
                              "env.tasks_file=TASKS.jsonl")
        cfg.env.fresh_tasks = 200
        notes.append(f"training on 200 fresh tasks from its generator (no {cfg.env.split} split; env.fresh_tasks=N)")
    if cfg.eval.split in space.split_names and not space.split(cfg.eval.split):
        raise ConfigError(f"{cfg.env.id} has no {cfg.eval.split} tasks to evaluate on: give its TaskSpace a "
                          f"{cfg.eval.split!r} split of tasks never trained on, or pass eval.split=train "
                          "(then the held-out figure is measured on training tasks)")
    return notes
