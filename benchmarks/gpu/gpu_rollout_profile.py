"""Where a real model's rollout spends its time on a GPU (docs/real_llm.md, "Sixth session": on an H200
the household-smol rollout took 16 s an iteration, its CPU seconds equal to its wall seconds, about
140 ms a forward with three processes on the card).

One process, the preset's own rollout (4 tasks x 4 episodes of up to 12 turns, history 1,
admissible-only decoding at temperature 1, LoRA r 16 on the bf16 base as the trainer runs it): a
warm-up rollout, then one timed with the model's forwards counted, then one under torch.profiler
(CPU and CUDA). Writes the wall and CPU seconds, forwards, seconds a forward, and the top operators
by host time and by device time.

    python benchmarks/gpu/gpu_rollout_profile.py --model MODEL --device cuda --out OUT.json
    python benchmarks/gpu/gpu_rollout_profile.py --model MODEL --device cpu --tasks 1 --group 1 --max-turns 2   # the check
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

PRESET = "household-smol"


def rollout(cfg, policy, tasks, seed: int):
    import agentgym
    from agentgym.policies.base import SamplingParams

    sampling = SamplingParams(temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                              seed=seed, admissible_only=cfg.rollout.admissible_only)
    return agentgym.collect(cfg.env.id, tasks, policy, cfg.rollout.group_size, seed=seed, sampling=sampling,
                            chat=vars(cfg.env.chat), env_kwargs=cfg.env.env_kwargs)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="catalog name, GGUF file or HF folder")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tasks", type=int, default=None, help="default: the preset's tasks_per_iter")
    ap.add_argument("--group", type=int, default=None, help="default: the preset's group_size")
    ap.add_argument("--max-turns", type=int, default=None, help="default: the preset's step limit")
    ap.add_argument("--out", type=Path, default=Path("gpu_rollout_profile.json"))
    args = ap.parse_args()

    from agentgym.policies.model_catalog import is_named_model, resolve_named_model
    from agentgym.registration import get_task_space
    from agentgym.trainers.config import load_config
    from agentgym.trainers.precision import bf16_rollout
    from agentgym.trainers.run_setup import make_policy

    overrides = [f"policy.model={args.model}", f"policy.device={args.device}", "ppo.matmul_dtype=bf16", "sft.enabled=false"]
    if args.tasks:
        overrides.append(f"rollout.tasks_per_iter={args.tasks}")
    if args.group:
        overrides.append(f"rollout.group_size={args.group}")
    if args.max_turns:
        overrides.append(f"env.env_kwargs={{max_episode_steps: {args.max_turns}}}")
    cfg = load_config(PRESET, overrides)
    model = resolve_named_model(args.model) if is_named_model(args.model) else args.model
    policy = make_policy(cfg.policy, model)
    print(bf16_rollout(cfg.ppo.matmul_dtype, policy, cfg.policy.engine) or "", flush=True)  # as the trainer does
    tasks = get_task_space(cfg.env.id).split("train")[:cfg.rollout.tasks_per_iter]
    forwards = [0]
    policy.model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))

    rollout(cfg, policy, tasks, seed=0)  # warm-up: kernels, allocator, tokenizer caches
    forwards[0] = 0
    synchronize(args.device)
    wall, cpu = time.perf_counter(), time.process_time()
    trajectories = rollout(cfg, policy, tasks, seed=1)
    synchronize(args.device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    turns = sum(len(t.steps) for t in trajectories)
    result = {"device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
              "torch": torch.__version__, "episodes": len(trajectories), "turns": turns, "forwards": forwards[0],
              "wall_s": wall, "cpu_s": cpu, "ms_per_forward": 1e3 * wall / max(forwards[0], 1)}
    print(json.dumps(result), flush=True)

    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        rollout(cfg, policy, tasks, seed=2)
        synchronize(args.device)
    averages = prof.key_averages()
    device_key = "self_device_time_total" if args.device.startswith("cuda") else "self_cpu_time_total"
    result["top_host_ops"] = averages.table(sort_by="self_cpu_time_total", row_limit=25)
    result["top_device_ops"] = averages.table(sort_by=device_key, row_limit=15)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(result["top_host_ops"])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
