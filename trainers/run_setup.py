"""What a run needs before its first iteration: its folder, the start model (tiny build, SFT warm
start), the policy, the value / progress heads its estimator declares, and the optimizer."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import torch

from agentgym import progress
from agentgym.errors import ConfigError
from agentgym.policies.engines import EngineSettings
from agentgym.policies.engines import make_engine as build_engine
from agentgym.policies.base import SamplingParams
from agentgym.policies.model_files import check_device, check_model_path
from agentgym.policies.scripted import OraclePolicy, RandomPolicy
from agentgym.policies import specs  # specs.load_policy: tests swap it for a scripted judge
from agentgym.registration import get_task_space
from agentgym.rewards.meta_reasoning import TAGS, tagged_reply
from agentgym.rollout import collect
from agentgym.tasks.generation import fresh_tasks
from agentgym.tasks.space import TaskSpace
from agentgym.trainers.config import EnvConfig, PolicyConfig, PPOConfig, SFTConfig, TinyModelConfig, TrainConfig
from agentgym.trainers.estimators import EstimatorConfig
from agentgym.trainers.heads import build_heads as heads_for
from agentgym.trainers.logging_utils import METRICS_FILE
from agentgym.trainers.sft import run_sft


def run_dir_for(cfg: TrainConfig) -> Path:
    return Path(cfg.run_dir) if cfg.run_dir else Path("runs") / cfg.name


def make_policy(policy_cfg: PolicyConfig, model_path: str | Path):
    """The policy the trainer updates (an HFPolicy); what generates its rollouts is `make_engine`."""
    from agentgym.policies.hf import HFPolicy  # torch and transformers: loaded when a model is

    return HFPolicy(model_path, device=policy_cfg.device, dtype=policy_cfg.dtype, lora=policy_cfg.lora,
                    reference=policy_cfg.reference, max_prompt_tokens=policy_cfg.max_prompt_tokens)


def make_engine(settings: EngineSettings, policy, model_path: str | Path):
    """policy.engine's rollout engine over the trainer's policy (agentgym.policies.engines): the
    policy itself for "hf", a vLLM engine or Ray replicas that sync from it after each update."""
    return build_engine(settings.policy.engine, policy, model_path, settings)


def prepare_start_model(cfg: TrainConfig, run_dir: Path, log: Callable[[str], None] = print,
                        session=progress.CURRENT) -> tuple[Path, dict]:
    """The model RL starts from, checked before anything is built (device, model path or hub id):

    * policy.model given: that model, always (tiny.build is ignored; nothing is written there);
    * policy.model empty and tiny.build: a tiny model built in <run_dir>/tiny_model;
    * then, with sft.enabled, its SFT warm start in <run_dir>/sft_model.

    A tiny or SFT model already in the run dir (a resumed or repeated run) is reused only when the
    settings it was built from match this config (a hash in its folder); otherwise it is rebuilt
    and the log says which settings changed. session: where the bars of the tiny model's rollouts
    and of SFT draw (agentgym.progress; by default the calling command's session)."""

    check_device(cfg.policy.device)
    info: dict = {}
    if cfg.policy.model:
        check_model_path(cfg.policy.model, what="policy.model")
        model: Path | str = cfg.policy.model
        if cfg.tiny.build:
            log(f"policy.model={cfg.policy.model} is the start model (tiny.build applies only when policy.model "
                "is empty)")
        start = {"policy.model": str(Path(model).expanduser().resolve()) if Path(model).expanduser().exists()
                 else str(model)}
    elif cfg.tiny.build:
        model = (run_dir / "tiny_model").absolute()  # `--run-dir run`: "run/tiny_model" would read as a hub id
        settings = tiny_settings(cfg.env, cfg.tiny, cfg.sft, cfg.seed)
        if not _reusable(model, settings, "tiny model", log):
            from agentgym.policies.tiny import build_tiny_model  # torch and transformers: when one is built

            t0 = time.perf_counter()
            texts = collect_env_texts(cfg.env.id, num_tasks=cfg.tiny.num_tasks, seed=cfg.seed, chat=cfg.env.chat,
                                      meta_tags=tagged(cfg.sft), session=session)
            build_tiny_model(model, env_id=cfg.env.id, texts=texts, vocab_size=cfg.tiny.vocab_size,
                             hidden=cfg.tiny.hidden, layers=cfg.tiny.layers, heads=cfg.tiny.heads, arch=cfg.tiny.arch,
                             seed=cfg.seed, meta_tags=tagged(cfg.sft))
            _write_record(model, settings)
            info["build_seconds"] = time.perf_counter() - t0
            log(f"built a tiny model (random weights, tokenizer from {cfg.env.id}'s text) in {model} "
                f"({info['build_seconds']:.1f}s)")
        # the tiny model's own record: one reused from before a chat option was added keeps the hash its
        # warm start was recorded against
        start = {"tiny": json.loads((model / SETTINGS_FILE).read_text()).get("hash", settings_hash(settings))}
    else:
        raise ConfigError("no model: set policy.model=PATH_OR_HUB_ID or tiny.build=true")
    if not cfg.sft.enabled:
        return model, info
    sft_dir = run_dir / "sft_model"
    if cfg.policy.model and Path(cfg.policy.model).expanduser().resolve() == sft_dir.resolve():
        raise ConfigError(f"policy.model={cfg.policy.model} is where this run writes its SFT warm start: copy it "
                          "elsewhere, or set sft.enabled=false to start RL from it")
    settings = sft_settings(cfg.env, cfg.policy, cfg.sft, cfg.seed, start)
    if not _reusable(sft_dir, settings, "SFT warm start", log):
        t0 = time.perf_counter()
        policy = make_policy(cfg.policy, model)
        student = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, admissible_only=cfg.rollout.admissible_only)
        stats = run_sft(policy, cfg.sft, cfg.env, cfg.seed, log=log, session=session, student_sampling=student)
        policy.save(sft_dir)
        _write_record(sft_dir, settings)
        info["sft"] = stats
        info["sft_seconds"] = time.perf_counter() - t0
        log(f"SFT done in {info['sft_seconds']:.1f}s: final loss {stats['final_loss']:.4f}")
    return sft_dir, info


def collect_env_texts(env_id: str, num_tasks: int = 64, seed: int = 0, chat: dict | None = None,
                      split: str = "train", meta_tags: bool = False, session=progress.CURRENT) -> list[str]:
    """Prompts and replies seen in oracle and random rollouts of `num_tasks` train tasks; with
    `meta_tags` the oracle's replies carry the meta-reasoning tags a tagged warm start writes.
    session: where the rollouts' bars draw (agentgym.progress)."""
    space = get_task_space(env_id)
    tasks = space.split(split)[:num_tasks]
    if not tasks and type(space).sample is not TaskSpace.sample:  # a generator and no split: fresh tasks
        tasks = fresh_tasks(space, num_tasks, seed=seed)
    if not tasks:
        raise ConfigError(f"{env_id} has no {split} tasks to learn a tokenizer from: give its TaskSpace a "
                          f"{split!r} split, or pass policy.model=PATH_OR_HUB_ID instead of building a tiny model")
    texts: list[str] = []
    # the oracle only when the env has one (it shows the replies that solve tasks); random play always
    has_oracle = type(space).solve is not TaskSpace.solve
    for policy in ((OraclePolicy(space, tags=meta_tags),) if has_oracle else ()) + (RandomPolicy(seed),):
        for traj in collect(env_id, tasks, policy, group_size=1, seed=seed, chat=chat, session=session):
            for step in traj.steps:
                texts.extend(m["content"] for m in (step.messages or []))
                texts.append(step.text)
            texts.append(traj.final_observation)
    if meta_tags:  # every tag with its note, also those the plain oracle never writes (monitor, reflection)
        texts.extend(tagged_reply(tag, "<action>look</action>") for tag in TAGS for _ in range(len(texts) // 100 + 1))
    return texts


# --- reuse of built models: a settings record in each built folder ----------------------------
SETTINGS_FILE = "agentgym_settings.json"  # in a built tiny / SFT model folder: what it was built from


def tagged(sft_cfg: SFTConfig) -> bool:
    """The warm start learns tagged replies (sft.tags): the tiny model's tokenizer must hold the tags."""
    return bool(sft_cfg.enabled and sft_cfg.tags)


# chat options added after warm starts were built, at the value that keeps the old prompt: left out of
# a settings record, so a tiny model or warm start built before them stays reusable
_CHAT_ADDED_LATER = {"memory_seen": False, "memory_unvisited": False}


def _chat_settings(chat) -> dict:
    """env.chat as a settings record holds it (a ChatConfig or the dict a record stored)."""
    chat = dataclasses.asdict(chat) if dataclasses.is_dataclass(chat) else dict(chat)
    return {k: v for k, v in chat.items() if not (k in _CHAT_ADDED_LATER and v == _CHAT_ADDED_LATER[k])}


def tiny_settings(env_cfg: EnvConfig, tiny_cfg: TinyModelConfig, sft_cfg: SFTConfig, seed: int) -> dict:
    """Everything a tiny model's tokenizer and weights depend on (build_tiny_model's arguments)."""
    return {"env.id": env_cfg.id, "seed": seed, "env.chat": _chat_settings(env_cfg.chat),
            **{f"tiny.{k}": v for k, v in dataclasses.asdict(tiny_cfg).items() if k != "build"},
            **({"meta_tags": True} if tagged(sft_cfg) else {})}  # absent when off: older tiny models stay reusable


def sft_settings(env_cfg: EnvConfig, policy_cfg: PolicyConfig, sft_cfg: SFTConfig, seed: int, start: dict) -> dict:
    """Everything the SFT warm start depends on: its start model, the demonstrations (env, tasks,
    chat layout, expert) and the optimisation."""
    env = env_cfg
    return {"start": start, "seed": seed, "env.id": env.id, "env.chat": _chat_settings(env.chat),
            "env.env_kwargs": env.env_kwargs, "env.categories": env.categories, "env.task_filter": env.task_filter,
            "env.fresh_tasks": env.fresh_tasks, "env.tasks_file": env.tasks_file, "env.max_tasks": env.max_tasks,
            "env.max_turns": env.max_turns, "policy.lora": policy_cfg.lora, "policy.dtype": policy_cfg.dtype,
            "policy.max_prompt_tokens": policy_cfg.max_prompt_tokens,
            **{f"sft.{k}": v for k, v in dataclasses.asdict(sft_cfg).items() if k != "enabled"
               # a setting added later at its old behaviour leaves warm starts built before it reusable
               and not (k == "filter_success" and v is True) and not (k == "tags" and v is False)
               and not (k == "dagger" and v["rounds"] == 0) and not (k == "matmul_dtype" and v == "fp32")}}


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _reusable(folder: Path, settings: dict, what: str, log: Callable[[str], None]) -> bool:
    """True when `folder` holds a model built from exactly `settings`; otherwise it is removed
    (it is rebuilt next) and the reason is logged."""
    if not folder.exists():
        return False
    try:
        record = json.loads((folder / SETTINGS_FILE).read_text())
    except (OSError, ValueError):
        record = None
    if isinstance(record, dict) and record.get("hash") == settings_hash(settings):
        log(f"reusing the {what} in {folder} (its settings match, hash {record['hash']})")
        return True
    stored = record.get("settings") if isinstance(record, dict) else None
    if isinstance(stored, dict) and isinstance(stored.get("env.chat"), dict) and \
            settings_hash({**stored, "env.chat": _chat_settings(stored["env.chat"])}) == settings_hash(settings):
        # recorded with a later-added chat option at its old value (a build between its addition and its
        # leaving the record): the same settings
        log(f"reusing the {what} in {folder} (its settings match)")
        return True
    if isinstance(stored, dict):
        old = json.loads(json.dumps(stored, default=str))
        new = json.loads(json.dumps(settings, default=str))
        changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        why = "its settings changed: " + ", ".join(
            f"{k} {old.get(k)!r} -> {new.get(k)!r}" if k != "start" else "start model" for k in changed[:4])
        why += f" (+{len(changed) - 4} more)" if len(changed) > 4 else ""
    else:
        why = "it has no settings record (built before records, or interrupted)"
    log(f"rebuilding the {what} in {folder}: {why}")
    shutil.rmtree(folder) if folder.is_dir() else folder.unlink()
    return False


def _write_record(folder: Path, settings: dict) -> None:
    # written last: a build interrupted before this line leaves a folder without a record, rebuilt next time
    (folder / SETTINGS_FILE).write_text(json.dumps({"hash": settings_hash(settings), "settings": settings},
                                                   indent=2, default=str))


def make_optimizer(ppo_cfg: PPOConfig, policy, heads: dict):
    groups = [{"params": policy.trainable_parameters(), "lr": ppo_cfg.lr, "weight_decay": ppo_cfg.weight_decay}]
    for head in heads.values():
        if head is not None:
            groups.append({"params": list(head.parameters()), "lr": ppo_cfg.value_lr, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups)
    warmup = max(ppo_cfg.warmup_steps, 0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / (warmup + 1)))
    return optimizer, scheduler


def build_heads(est_cfg: EstimatorConfig, policy) -> dict:
    """The value / progress heads the estimator declares (trainers/heads.py)."""
    return heads_for(est_cfg.name, policy.hidden_size(), policy.device)


RUN_OUTPUTS = (METRICS_FILE, "summary.json", "checkpoints", "final_model", "tensorboard", "trajectories", "evals")
# everything a run writes in its run dir (and eval_<split>.jsonl): prepare_run_dir checks these hold no link
RUN_WRITES = (*RUN_OUTPUTS, "config.yaml", "learning_curves.png", "tiny_model", "sft_model")


def previous_run(run_dir: Path) -> list[str]:
    """What an earlier run left in run_dir (its metrics, summary, checkpoints, final model, ...); empty
    when no run wrote its config.yaml there. The tiny model and SFT warm start are not listed: a new
    run in the folder reuses them when their settings match (prepare_start_model)."""
    if not (run_dir / "config.yaml").is_file():
        return []
    return [name for name in RUN_OUTPUTS if (run_dir / name).exists()]


def prepare_run_dir(run_dir: Path) -> None:
    """Before a run writes anything: run_dir exists or is made, is a folder this process can write
    in, and nothing the run writes there (RUN_WRITES) is or holds a link (it would take the run's
    writes outside: a final_model linked to another folder had its model files written there).
    One line otherwise."""
    import os

    from agentgym.output_folders import DISK_FULL_ERRNOS, prepare_output_folder

    try:
        prepare_output_folder(run_dir, "run dir", "set --run-dir (run_dir=) to a folder you can write")
    except OSError as exc:
        if exc.errno not in DISK_FULL_ERRNOS:
            raise
        from agentgym.trainers.disk import disk_full_error

        raise disk_full_error(run_dir, exc) from None
    written = [run_dir / name for name in RUN_WRITES] + sorted(run_dir.glob("eval_*.jsonl"))
    for top in written:
        inside = [top] + ([Path(f) / n for f, dirs, files in os.walk(top) for n in dirs + files]  # links not followed
                          if top.is_dir() and not top.is_symlink() else [])
        for path in inside:
            if path.is_symlink():
                raise ConfigError(f"{path} is a link (to {os.readlink(path)}): a run writes only inside its run dir "
                                  f"{run_dir}; remove the link (copy what it names in its place), or use another "
                                  "--run-dir")


def finished_run(run_dir: Path, iterations: int) -> dict | None:
    """The summary of the run in run_dir when it has trained `iterations` and written its results
    (final model, summary.json, its last checkpoint at that iteration); None when there is more to
    do (an interrupted run, one stopped by its time budget, or `iterations` raised since)."""
    from agentgym.trainers.checkpoint import CheckpointError, latest_checkpoint

    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        checkpoint = latest_checkpoint(run_dir)
        state = json.loads((checkpoint / "state.json").read_text(encoding="utf-8")) if checkpoint else None
    except (OSError, ValueError, CheckpointError):
        return None
    if not isinstance(summary, dict) or not isinstance(state, dict) or not (run_dir / "final_model").is_dir():
        return None
    done = state.get("iteration") == summary.get("iterations") and isinstance(state.get("iteration"), int) \
        and state["iteration"] >= iterations and not summary.get("stopped_early")
    return summary if done else None


def finished_line(run_dir: Path, summary: dict) -> str:
    return (f"{run_dir} holds a finished run ({summary['iterations']} iterations): nothing was changed; its results "
            f"are in {run_dir / 'summary.json'}, {run_dir / 'final_model'} and {run_dir / 'metrics.jsonl'} (raise "
            "iterations= to train it further with --resume, or --overwrite to start again)")


TRAIN_FIXES = "--resume continues it, --run-dir DIR starts the new run in another folder, --overwrite replaces it"


def refuse_to_replace(run_dir: Path, found: list[str], fixes: str = TRAIN_FIXES) -> None:
    """A new run never deletes an old one unless asked (as TRL's overwrite_output_dir)."""
    if found:
        raise ConfigError(f"{run_dir} holds an earlier run ({', '.join(found)}): {fixes}")


def clear_previous_run(run_dir: Path) -> list[str]:
    """--overwrite: drop the old run's metrics, checkpoints and final model, so its curves are not
    appended to this run's and a later --resume cannot pick up its checkpoints. Returns what was removed."""
    import shutil

    removed = previous_run(run_dir)
    for name in removed:
        path = run_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return removed


def quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def load_judge(reward_spec: Any) -> Any:
    """The judge model a training config names for its reward (env.reward.judge.policy: hf:PATH or
    openai:URL:MODEL, as `agentgym eval --policy`), or None when it names none."""
    judge = reward_spec.get("judge") if isinstance(reward_spec, dict) else None
    name = judge.get("policy") if isinstance(judge, dict) else None
    if name is None:
        return None
    if not isinstance(name, str):
        raise ConfigError(f"env.reward.judge.policy={name!r} must be a string: hf:PATH or openai:URL:MODEL")
    spec = specs.parse_policy_spec(name)
    if not spec.is_llm:
        raise ConfigError(f"env.reward.judge.policy={name!r} cannot judge: use a model, hf:PATH or openai:URL:MODEL")
    return specs.load_policy(spec, env_id="")
