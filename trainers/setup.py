"""What a run needs before its first iteration: its folder, the start model (tiny build, SFT warm
start), the policy, the value / progress heads its estimator declares, and the optimizer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import torch

from agentgym.trainers.config import TrainConfig


def run_dir_for(cfg: TrainConfig) -> Path:
    return Path(cfg.run_dir) if cfg.run_dir else Path("runs") / cfg.name


def make_policy(cfg: TrainConfig, model_path: str | Path):
    from agentgym.policies.hf import HFPolicy

    policy = HFPolicy(model_path, device=cfg.policy.device, dtype=cfg.policy.dtype, lora=cfg.policy.lora,
                      reference=cfg.policy.reference, max_prompt_tokens=cfg.policy.max_prompt_tokens)
    if cfg.policy.engine == "vllm":
        # the trainer's HFPolicy, generating on vLLM; it re-syncs the engine whenever the weights changed
        from agentgym.policies.vllm_engine import VLLMRolloutPolicy

        return VLLMRolloutPolicy(policy, model_path, **{"seed": cfg.seed, **cfg.policy.vllm.policy_kwargs()})
    if cfg.policy.engine == "ray":  # generation on Ray replicas (HF or vLLM, ray.policy_engine), synced after each update
        from agentgym.policies.ray_policy import RayRolloutPolicy

        return RayRolloutPolicy(policy, model_path, cfg.ray, seed=cfg.seed, lora=cfg.policy.lora,
                                vllm_kwargs=cfg.policy.vllm.policy_kwargs())
    return policy


def prepare_start_model(cfg: TrainConfig, run_dir: Path, log: Callable[[str], None] = print) -> tuple[Path, dict]:
    """The model RL starts from: policy.model, or a tiny model built here, then SFT'd if asked.
    Steps already done in this run dir (a resumed run) are reused, not redone."""
    info: dict = {}
    model = Path(cfg.policy.model) if cfg.policy.model else run_dir / "tiny_model"
    if cfg.tiny.build and not (model / "config.json").is_file():
        from agentgym.policies.tiny import build_tiny_model

        t0 = time.perf_counter()
        build_tiny_model(model, env_id=cfg.env.id, vocab_size=cfg.tiny.vocab_size, hidden=cfg.tiny.hidden,
                         layers=cfg.tiny.layers, heads=cfg.tiny.heads, arch=cfg.tiny.arch, seed=cfg.seed,
                         num_tasks=cfg.tiny.num_tasks, chat=cfg.env.chat)
        info["build_seconds"] = time.perf_counter() - t0
        log(f"built tiny model in {model} ({info['build_seconds']:.1f}s)")
    if not cfg.sft.enabled:
        return (model if cfg.tiny.build or cfg.policy.model else Path(cfg.policy.model)), info
    sft_dir = run_dir / "sft_model"
    if not (sft_dir / "config.json").is_file() and not (sft_dir / "adapter_config.json").is_file():
        from agentgym.trainers.sft import run_sft

        t0 = time.perf_counter()
        policy = make_policy(cfg, model)
        stats = run_sft(policy, cfg, log=log)
        policy.save(sft_dir)
        info["sft"] = stats
        info["sft_seconds"] = time.perf_counter() - t0
        log(f"SFT done in {info['sft_seconds']:.1f}s: final loss {stats['final_loss']:.4f}")
    return sft_dir, info


def make_optimizer(cfg: TrainConfig, policy, heads: dict):
    groups = [{"params": policy.trainable_parameters(), "lr": cfg.ppo.lr, "weight_decay": cfg.ppo.weight_decay}]
    for head in heads.values():
        if head is not None:
            groups.append({"params": list(head.parameters()), "lr": cfg.ppo.value_lr, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups)
    warmup = max(cfg.ppo.warmup_steps, 0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / (warmup + 1)))
    return optimizer, scheduler


def build_heads(cfg: TrainConfig, policy) -> dict:
    from agentgym.trainers.estimators import estimator_spec

    heads: dict = {}
    spec = estimator_spec(cfg.estimator.name)
    if spec.value_head:
        from agentgym.trainers.ppo import ValueHead

        heads["value"] = ValueHead(policy.hidden_size()).to(policy.device)
    if spec.progress_head:
        from agentgym.trainers.spa_progress import ProgressHead

        heads["progress"] = ProgressHead(policy.hidden_size()).to(policy.device)
    return heads


def clear_previous_run(run_dir: Path) -> list[str]:
    """A fresh run in a used run dir: drop the old run's metrics, checkpoints and final model, so its
    curves are not appended to this run's and a later --resume cannot pick up its checkpoints. The
    tiny model and SFT warm start stay: they are reused when present (prepare_start_model). Only a
    folder an earlier run wrote its config.yaml into is touched. Returns what was removed."""
    import shutil
    from agentgym.trainers.logging_utils import METRICS_FILE

    if not (run_dir / "config.yaml").is_file():
        return []
    removed = []
    for name in (METRICS_FILE, "summary.json", "checkpoints", "final_model", "tensorboard", "trajectories", "evals"):
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        removed.append(name)
    return removed


def quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
