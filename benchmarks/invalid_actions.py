"""Where a household policy's invalid actions happen: on the first step, after a valid step, or
after an invalid one (whose observation is only "Nothing happens.").

Plays the household-tiny held-out tasks (the preset's categories of `heldout`) with the
preset's prompt layout and sampling, and prints the invalid-action rate in each context and
the most common invalid commands. The oracle the warm start imitates never acts invalidly and
knows where objects are, so these are the states behaviour cloning never showed the model.

    python benchmarks/invalid_actions.py runs/household-tiny/sft_model
    python benchmarks/invalid_actions.py runs/household-tiny/final_model --episodes 8
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="HF model folder (e.g. runs/household-tiny/sft_model)")
    parser.add_argument("--episodes", type=int, default=4, help="sampled episodes per held-out task")
    parser.add_argument("--preset", default="household-tiny")
    args = parser.parse_args()

    import torch

    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import load_split
    from agentgym.trainers.config import load_config
    from agentgym.trainers.evaluate import evaluate
    from agentgym.trainers.loop import write_eval_tasks

    cfg = load_config(args.preset, [])
    torch.set_num_threads(cfg.torch_threads or torch.get_num_threads())
    manifest = write_eval_tasks(cfg, get_task_space(cfg.env.id), Path(tempfile.mkdtemp()))  # the run's held-out set
    tasks = load_split(manifest)
    result = evaluate(cfg.env.id, HFPolicy(args.model), split=manifest, episodes_per_task=args.episodes,
                      sampling=SamplingParams(temperature=cfg.eval.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                                              seed=0),
                      chat=cfg.env.chat, env_kwargs=cfg.env.env_kwargs, seed=0)

    counts: collections.Counter = collections.Counter()
    invalid_commands: collections.Counter = collections.Counter()
    for traj in result.trajectories:
        previous_valid = None
        for i, step in enumerate(traj.steps):
            context = "first step" if i == 0 else ("after a valid step" if previous_valid else "after an invalid step")
            counts[context, step.action_valid] += 1
            if not step.action_valid:
                invalid_commands[" ".join((step.action or step.text).split()[:1]) or "(empty)"] += 1
            previous_valid = step.action_valid

    print(f"{args.model}: {len(tasks)} held-out tasks x {args.episodes} episodes, "
          f"success {result.success_rate:.3f}")
    print(f"{'context':24s} {'steps':>6s} {'invalid':>8s}")
    for context in ("first step", "after a valid step", "after an invalid step"):
        total = counts[context, True] + counts[context, False]
        print(f"{context:24s} {total:6d} {counts[context, False] / max(total, 1):8.3f}")
    print("invalid commands by first word:", ", ".join(f"{w} {n}" for w, n in invalid_commands.most_common(5)))


if __name__ == "__main__":
    main()
