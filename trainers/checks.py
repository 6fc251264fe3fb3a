"""Every rule of the training config that spans fields or sections, in one place.

A section's own checks (types, ranges, its fields' choices) run when the section is built
(trainers/config.py); the rules here read several sections at once and run once the whole
config exists, still before any model, env or process is started. Each is one line saying what
to change. This module is torch-free and imports only what the rules ask about (estimator
specs, the executor and policy-engine registries, task sources), never the trainer's modules
that run a step: the config sits at the bottom of the trainer stack.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from agentgym.errors import ConfigError, install_hint
from agentgym.executors import check_executor
from agentgym.policies.engines import check_engine, engine_names, generates_with_trainer_model
from agentgym.policies.engines import needs_ray_cluster as engine_needs_ray_cluster
from agentgym.policies.model_files import DTYPES
from agentgym.trainers.estimators import estimator_spec
from agentgym.trainers.rollout_correction import check_rollout_correction

if TYPE_CHECKING:
    from agentgym.trainers.config import TrainConfig

DATA_PARALLEL = ("ddp", "fsdp")
DEFAULT_IS_CAP = 2.0  # TIS's truncation (Yao et al. 2025); the dual clip of Ye et al. 2020 uses 3


def validate_config(cfg: TrainConfig) -> None:
    """The checks that span fields or sections; each section's own checks and the per-field
    ranges ran when the config was built (trainers/config.py)."""
    if cfg.env.chat.invalid_penalty and cfg.estimator.invalid_penalty:
        # the env's penalty lowers the reward the estimator sees, then the estimator's is subtracted again
        raise ConfigError("env.chat.invalid_penalty and estimator.invalid_penalty would both charge an invalid "
                          "action: set only estimator.invalid_penalty (the trainer's; the env's is for other trainers)")
    if cfg.policy.vllm.dtype is not None and cfg.policy.vllm.dtype not in DTYPES:
        raise ConfigError(f"policy.vllm.dtype={cfg.policy.vllm.dtype!r} is unknown; choose fp32, bf16 or fp16")
    cfg.policy.vllm.policy_kwargs()  # engine_args naming one of our own settings
    check_tasks(cfg)
    check_episode_steps(cfg.env)
    check_env_reward(cfg.env)
    if cfg.rollout.group_size == 1 and estimator_spec(cfg.estimator.name).group_relative:
        raise ConfigError(f"estimator {cfg.estimator.name!r} compares episodes within a group: set rollout.group_size >= 2 "
                          "(or use estimator.name=gae)")
    check_sft(cfg)
    if not cfg.policy.model and not cfg.tiny.build:
        raise ConfigError("no model: set policy.model=PATH_OR_HUB_ID or tiny.build=true")
    if cfg.policy.model:  # a given model is always that model, tiny.build or not (trainers/run_setup.py)
        from agentgym.policies.model_files import check_model_path

        check_model_path(cfg.policy.model, what="policy.model")
    check_update(cfg)
    check_scaling(cfg)
    check_async(cfg)
    check_rollout_correction(cfg.ppo, cfg.rollout, cfg.distill.enabled)


def check_tasks(cfg: TrainConfig) -> None:
    from agentgym.tasks.curricula import CURRICULA
    from agentgym.tasks.source import KINDS

    for key, value, choices in (("source", cfg.tasks.source, list(KINDS)),
                                ("curriculum", cfg.tasks.curriculum, list(CURRICULA))):
        if value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"tasks.{key}={value!r} is unknown: {hint}(choose one of {', '.join(choices)})")
    if cfg.env.split != "train":
        raise ConfigError(f"env.split={cfg.env.split!r}: only the train split can be trained on; held-out splits "
                          "are for `agentgym eval` (set eval.split instead)")
    if cfg.env.fresh_tasks and cfg.env.tasks_file:
        raise ConfigError("env.fresh_tasks and env.tasks_file both name the training tasks: set only one")
    if cfg.env.fresh_tasks < 0:
        raise ConfigError(f"env.fresh_tasks must be >= 0 (0 = the train split), got {cfg.env.fresh_tasks}")


def check_episode_steps(env_cfg) -> None:
    """env.env_kwargs.max_episode_steps: gym's TimeLimit, a whole number >= 1 (0 failed at the
    first step with a traceback, -1 meant no limit at all)."""
    steps = (env_cfg.env_kwargs or {}).get("max_episode_steps") if isinstance(env_cfg.env_kwargs, dict) else None
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ConfigError(f"env.env_kwargs.max_episode_steps={steps!r} must be a whole number >= 1 (leave it out for "
                          "the env's own limit)")


class _JudgeNotAsked:
    """Stands in for the judge model while env.reward is checked: building a reward never asks it."""


def check_env_reward(env_cfg) -> None:
    """env.reward as a mapping, built here as the trainer will build it (kind, options, weights,
    the judge cache file), before any model loads."""
    spec = env_cfg.reward
    if spec is None:
        return
    if isinstance(spec, str):
        return  # a mode name: config.py's _check_reward_mode asks the env's signature
    from agentgym.rewards.hook import reward_hook

    try:
        reward_hook(spec, judge_policy=_JudgeNotAsked())
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"env.reward is malformed ({type(exc).__name__}: {first}): see agentgym/rewards/hook.py "
                          "for its form") from None


def check_sft(cfg: TrainConfig) -> None:
    if cfg.sft.enabled and cfg.sft.epochs == 0 and not cfg.sft.dagger.rounds:
        raise ConfigError("sft.epochs=0 trains nothing: give it epochs, add sft.dagger.rounds (DAgger on a start "
                          "model that is a clone already), or set sft.enabled=false")
    if cfg.sft.matmul_dtype not in ("fp32", "bf16"):
        raise ConfigError(f"sft.matmul_dtype must be fp32 or bf16, got {cfg.sft.matmul_dtype!r}")
    if cfg.sft.expert not in ("oracle", "searching"):
        raise ConfigError(f"sft.expert must be 'oracle' or 'searching', got {cfg.sft.expert!r}")
    if not 0.0 <= cfg.sft.dawdle_prob < 1.0:
        raise ConfigError(f"sft.dawdle_prob is a per-command probability in [0, 1), got {cfg.sft.dawdle_prob}")
    if cfg.sft.dawdle_prob and cfg.sft.expert != "searching":
        raise ConfigError("sft.dawdle_prob is a trait of the searching expert: set sft.dawdle_prob=0 "
                          "(or sft.expert=searching)")
    if not 0.0 <= cfg.sft.slip_prob < 1.0:
        raise ConfigError(f"sft.slip_prob is a per-turn probability in [0, 1), got {cfg.sft.slip_prob}")
    if type(cfg.sft.filter_success) is not bool:  # a config built in code skips the loader's type check
        raise ConfigError(f"sft.filter_success must be true or false, got {cfg.sft.filter_success!r}")
    if cfg.sft.enabled and cfg.sft.tags and cfg.env.chat.parser not in (None, "tag"):
        # the replies SFT teaches are tagged: a raw parser would read none of them in RL
        raise ConfigError(f"sft.tags=true writes <tag>...</tag><action>...</action> replies: set env.chat.parser=tag "
                          f"(not {cfg.env.chat.parser})")


def check_update(cfg: TrainConfig) -> None:
    from agentgym.continuation import ON_MISMATCH

    if cfg.rollout.on_template_mismatch not in ON_MISMATCH:
        raise ConfigError(f"rollout.on_template_mismatch={cfg.rollout.on_template_mismatch!r} is unknown; choose "
                          f"{' or '.join(ON_MISMATCH)}")
    pc = cfg.ppo
    if pc.sample_mode not in ("per-step", "full"):
        raise ConfigError(f"ppo.sample_mode must be per-step or full, got {pc.sample_mode!r}")
    if pc.sample_mode == "full" and cfg.env.chat.history != "full":
        raise ConfigError("ppo.sample_mode=full needs one growing conversation per episode: set env.chat.history=full")
    if pc.loss_agg not in ("token-mean", "seq-mean"):
        raise ConfigError(f"ppo.loss_agg must be token-mean or seq-mean, got {pc.loss_agg!r}")
    for key in ("epochs", "minibatch_size", "micro_batch_size"):
        if getattr(pc, key) < 1:
            raise ConfigError(f"ppo.{key} must be >= 1")
    if pc.micro_batch_tokens < 0:
        raise ConfigError(f"ppo.micro_batch_tokens must be >= 0 (0: micro-batches of ppo.micro_batch_size samples), "
                          f"got {pc.micro_batch_tokens}")
    if pc.matmul_dtype not in ("fp32", "bf16"):
        raise ConfigError(f"ppo.matmul_dtype must be fp32 or bf16, got {pc.matmul_dtype!r}")
    if pc.entropy_coef < 0:
        raise ConfigError(f"ppo.entropy_coef is a bonus weight >= 0, got {pc.entropy_coef}")
    if pc.kl_coef > 0 and cfg.policy.lora is None and cfg.policy.reference != "copy":
        raise ConfigError("ppo.kl_coef > 0 needs a reference: use LoRA (policy.lora={}) or policy.reference=copy")


def check_scaling(cfg: TrainConfig) -> None:
    """Executors, policy engines, Ray and data parallel: names asked of their registries."""
    from agentgym.executors_ray import validate_ray_config

    try:
        check_executor(cfg.env.executor)
    except ConfigError as exc:
        raise ConfigError(f"env.executor: {exc}") from None
    check_engine(cfg.policy.engine)
    validate_ray_config(cfg.ray)
    if cfg.data_parallel not in DATA_PARALLEL:
        raise ConfigError(f"data_parallel={cfg.data_parallel!r} is unknown; choose ddp (a model replica per rank) or "
                          "fsdp (the model sharded over the ranks)")
    if cfg.data_parallel == "fsdp" and not generates_with_trainer_model(cfg.policy.engine):
        raise ConfigError(f"data_parallel=fsdp shards the trainer's own model, but policy.engine={cfg.policy.engine} "
                          "generates with another copy: use policy.engine=hf, or data_parallel=ddp")
    if cfg.data_parallel == "fsdp" and cfg.policy.engine == "pool":
        raise ConfigError("policy.engine=pool reads the trainer's weights whole, which data_parallel=fsdp shards: use "
                          "policy.engine=hf with fsdp, or data_parallel=ddp")
    if type(cfg.rollout.admissible_only) is not bool:  # a config built in code skips the loader's type check
        raise ConfigError(f"rollout.admissible_only must be true or false, got {cfg.rollout.admissible_only!r}")
    if cfg.rollout.admissible_only and not generates_with_trainer_model(cfg.policy.engine):
        raise ConfigError(f"rollout.admissible_only decodes within a trie of the admissible actions, which the trainer's "
                          f"own HF model does; policy.engine={cfg.policy.engine} cannot: use policy.engine=hf")
    check_admissible_parser(cfg.rollout, cfg.env.chat)
    if cfg.ray.policy_engine != "hf":
        if not engine_needs_ray_cluster(cfg.policy.engine):
            on_ray = " or ".join(f"policy.engine={n}" for n in engine_names() if engine_needs_ray_cluster(n))
            raise ConfigError(f"ray.policy_engine={cfg.ray.policy_engine} sets what Ray policy replicas run: add "
                              f"{on_ray} (policy.engine={cfg.policy.engine} runs no replicas on Ray)")
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise ConfigError("ray.policy_engine=vllm needs vLLM, which is not installed: run "
                              f"`{install_hint('vllm')}`")


# Parsers whose written form of an env's listed action reads back as that action. JSON's
# `<tool_call>go left</tool_call>` is not JSON: every constrained reply would be invalid.
ADMISSIBLE_PARSERS = ("tag", "raw")


def check_admissible_parser(rollout_cfg, chat_cfg) -> None:
    """rollout.admissible_only decodes each listed action as env.chat.parser writes it; the
    parser must read that back as the action."""
    parser = getattr(chat_cfg, "parser", "tag")
    if rollout_cfg.admissible_only and isinstance(parser, str) and parser not in ADMISSIBLE_PARSERS:
        raise ConfigError(f"rollout.admissible_only with env.chat.parser={parser} would decode replies the parser reads "
                          f"as invalid (admissible actions are plain text, not {parser} calls): use env.chat.parser="
                          f"{' or '.join(ADMISSIBLE_PARSERS)}, or rollout.admissible_only=false")


def check_world(cfg: TrainConfig, world_size: int) -> None:
    """Data-parallel limits, one line each, before any work starts."""
    if world_size <= 1:
        return
    groups = cfg.rollout.tasks_per_iter
    if groups % world_size:
        raise ConfigError(f"rollout.tasks_per_iter={groups} groups cannot be split evenly over {world_size} ranks "
                          f"(a group never spans ranks): make it a multiple of {world_size} or run a world size "
                          f"that divides {groups}")
    if estimator_spec(cfg.estimator.name).progress_head:
        raise ConfigError("estimator spa fits its progress head on the whole batch, which data-parallel ranks do not "
                          "share yet: train spa on one process")
    if rollouts_ahead(cfg.rollout, cfg.ppo):
        raise ConfigError("asynchronous rollouts and long-tail control (rollout.max_staleness, oversample_groups, "
                          "episode_time_limit_s) run in one process: train them without --nproc")


def rollouts_ahead(rollout_cfg, ppo_cfg) -> bool:
    """Whether batches are made under asynchrony or long-tail control (trainers/batches.py);
    otherwise each batch is played right when the loop asks for it, on the trainer's policy."""
    r = rollout_cfg
    return bool(r.max_staleness > 0 or r.oversample_groups > 0 or r.episode_time_limit_s is not None
                or ppo_cfg.decoupled)


def check_async(cfg: TrainConfig) -> None:
    r, pc = cfg.rollout, cfg.ppo
    name = cfg.estimator.name
    if r.max_staleness < 0:
        raise ConfigError(f"rollout.max_staleness must be >= 0 (0 = synchronous rollouts), got {r.max_staleness}")
    if pc.is_cap is not None and pc.is_cap <= 0:
        raise ConfigError(f"ppo.is_cap truncates importance weights and must be > 0 (e.g. 2.0), got {pc.is_cap}")
    if r.oversample_groups < 0:
        raise ConfigError(f"rollout.oversample_groups must be >= 0, got {r.oversample_groups}")
    if r.episode_time_limit_s is not None and r.episode_time_limit_s <= 0:
        raise ConfigError(f"rollout.episode_time_limit_s must be > 0 seconds (or null for none), "
                          f"got {r.episode_time_limit_s}")
    if r.partial_rollouts and r.max_staleness == 0:
        raise ConfigError("rollout.partial_rollouts lets episodes span a weight update, which only happens with "
                          "asynchronous rollouts: set rollout.max_staleness >= 1")
    if r.max_staleness == 0:
        return
    if estimator_spec(name).fits_heads:
        raise ConfigError(f"estimator {name!r} fits a head on the hidden states of the weights that generated the "
                          "batch, which async rollouts no longer have: use grpo, rloo, loop or gigpo, or set "
                          "rollout.max_staleness=0")
    if not generates_with_trainer_model(cfg.policy.engine):
        raise ConfigError(f"rollout.max_staleness > 0 runs the producer on a copy of the HF model; "
                          f"policy.engine={cfg.policy.engine!r} is not supported with it: use policy.engine=hf")
    if pc.recompute_old_logprobs:
        raise ConfigError("ppo.recompute_old_logprobs would overwrite the behaviour logprobs that correct stale "
                          "samples: use ppo.decoupled=true (recomputed proximal logprobs) instead")


def importance_cap(ppo_cfg, rollout_cfg) -> float | None:
    """The truncation cap of the off-policy correction: ppo.is_cap, or the default when batches
    may be stale; None for a synchronous run (plain PPO-clip)."""
    cap = ppo_cfg.is_cap
    if cap is None and rollout_cfg.max_staleness > 0:
        cap = DEFAULT_IS_CAP
    return None if cap is None else float(cap)
