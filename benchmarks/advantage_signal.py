"""Is the advantage signal of a household-tiny rollout pointing the right way? Mean advantage on
valid and on invalid steps, and how much of it the step-level part (GiGPO's anchor groups)
carries, for a model's own rollouts on fresh training tasks.

    python benchmarks/advantage_signal.py runs/household-tiny/sft_model
    python benchmarks/advantage_signal.py runs/household-tiny/sft_model --tasks 24 --group 6
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="HF model folder (e.g. runs/household-tiny/sft_model)")
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--group", type=int, default=6, help="episodes per task")
    parser.add_argument("--preset", default="household-tiny")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    import torch

    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.rollout import collect
    from agentgym.trainers.config import load_config
    from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
    from agentgym.trainers.loop import select_train_tasks

    cfg = load_config(args.preset, [])
    torch.set_num_threads(cfg.torch_threads or torch.get_num_threads())
    tasks = select_train_tasks(cfg, get_task_space(cfg.env.id))[: args.tasks]
    sampling = SamplingParams(temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                              seed=args.seed)
    trajs = collect(cfg.env.id, tasks, HFPolicy(args.model), args.group, seed=args.seed, sampling=sampling,
                    chat=cfg.env.chat, env_kwargs=cfg.env.env_kwargs)
    print(f"{args.model}: {len(tasks)} tasks x {args.group} episodes, success "
          f"{np.mean([t.success for t in trajs]):.3f}, estimator {cfg.estimator['name']}")
    print("variant                 | mean adv: valid  invalid | step part: valid  invalid | invalid steps with adv > 0")
    for name, extra in [("preset", {}), ("invalid_no_credit=true", {"invalid_no_credit": True})]:
        options = {**cfg.estimator, **extra}
        full = compute_advantages(trajs, EstimatorConfig(**options))
        episode_only = compute_advantages(trajs, EstimatorConfig(**{**options, "omega": 0.0}))
        valid = np.concatenate([[s.action_valid for s in t.steps] for t in trajs]).astype(bool)
        adv, step_part = np.concatenate(full), np.concatenate(full) - np.concatenate(episode_only)
        print(f"{name:<23} | {adv[valid].mean():+.3f}  {adv[~valid].mean():+.3f}        | "
              f"{step_part[valid].mean():+.3f}  {step_part[~valid].mean():+.3f}         | {np.mean(adv[~valid] > 0):.2f}")


if __name__ == "__main__":
    main()
