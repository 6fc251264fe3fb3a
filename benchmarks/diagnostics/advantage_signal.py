"""Is the advantage signal of a household-tiny rollout pointing the right way? Mean advantage on
useful, idle (look / inventory / examine: valid, changes nothing) and invalid steps, and on the
valid step just before an invalid one (where a penalty placed before discounting leaks), with
how much of it the step-level part (GiGPO's anchor groups) carries, for a model's own rollouts
on fresh training tasks. Variants: the preset, invalid_no_credit, and the penalty placed on the
advantage instead of the reward (estimator.penalty_placement).

    python benchmarks/diagnostics/advantage_signal.py runs/household-tiny/sft_model
    python benchmarks/diagnostics/advantage_signal.py runs/household-tiny/sft_model --tasks 24 --group 6
"""

from __future__ import annotations

import argparse

import dataclasses

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
    from agentgym.trainers.estimators import compute_advantages
    from agentgym.trainers.task_selection import select_train_tasks

    cfg = load_config(args.preset, [])
    from agentgym.trainers.threads import set_torch_threads

    set_torch_threads(cfg.torch_threads, print)  # a number, auto, or torch's default
    tasks = select_train_tasks(cfg.env, get_task_space(cfg.env.id), cfg.seed)[: args.tasks]
    sampling = SamplingParams(temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                              seed=args.seed)
    trajs = collect(cfg.env.id, tasks, HFPolicy(args.model), args.group, seed=args.seed, sampling=sampling,
                    chat=cfg.env.chat, env_kwargs=cfg.env.env_kwargs)
    print(f"{args.model}: {len(tasks)} tasks x {args.group} episodes, success "
          f"{np.mean([t.success for t in trajs]):.3f}, estimator {cfg.estimator.name}")
    print("variant                     | mean adv: useful   idle  invalid  before-invalid | step part: useful   idle  "
          "invalid | invalid with adv > 0")
    idle_cmd = ("look", "inventory", "examine ")
    valid = np.concatenate([[s.action_valid for s in t.steps] for t in trajs]).astype(bool)
    idle = np.concatenate([[bool(s.action_valid and (s.action or "").startswith(idle_cmd)) for s in t.steps]
                           for t in trajs]).astype(bool)
    useful = valid & ~idle
    before_invalid = np.concatenate([[i + 1 < len(t.steps) and not t.steps[i + 1].action_valid and s.action_valid
                                      for i, s in enumerate(t.steps)] for t in trajs]).astype(bool)
    print(f"steps: {useful.sum()} useful, {idle.sum()} idle, {(~valid).sum()} invalid, {before_invalid.sum()} before an invalid one")
    variants = [("preset", {}), ("invalid_no_credit=true", {"invalid_no_credit": True}),
                ("penalty_placement=advantage", {"penalty_placement": "advantage"})]
    for name, extra in variants:
        options = dataclasses.replace(cfg.estimator, **extra)
        full = np.concatenate(compute_advantages(trajs, options))
        step_part = full - np.concatenate(compute_advantages(trajs, dataclasses.replace(options, omega=0.0)))

        def mean(a, mask):
            return f"{a[mask].mean():+.3f}" if mask.any() else "  n/a"

        print(f"{name:<27} | {mean(full, useful)}  {mean(full, idle)}  {mean(full, ~valid)}   {mean(full, before_invalid)}"
              f"        | {mean(step_part, useful)}  {mean(step_part, idle)}  {mean(step_part, ~valid)} | "
              f"{np.mean(full[~valid] > 0) if (~valid).any() else 0:.2f}")

if __name__ == "__main__":
    main()
