"""How a household-tiny model searches: its first move on each held-out task.

With no memory in its prompt (`env.chat.history: 0`) the model can only search at random, and
`benchmarks/diagnostics/memoryless_ceiling.py` shows random search is worth ~0.96 success while one fixed
choice is worth ~0.35. This samples the first reply of each held-out task many times and prints
the share of replies that name a listed receptacle ("go to X" with X in the room) and how evenly
they spread over the listed ones (entropy / log(number listed): 1 = uniform, 0 = always the same).

    python benchmarks/diagnostics/search_entropy.py runs/household-tiny/sft_model runs/household-tiny/final_model
"""

from __future__ import annotations

import argparse
import collections
import math
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="HF model folders")
    parser.add_argument("--samples", type=int, default=64, help="sampled first replies per task")
    parser.add_argument("--preset", default="household-tiny")
    args = parser.parse_args()

    import gymnasium as gym
    import torch

    from agentgym.chat import ChatEnv
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import load_split
    from agentgym.trainers.config import load_config
    from agentgym.trainers.task_selection import write_eval_tasks

    cfg = load_config(args.preset, [])
    from agentgym.trainers.threads import set_torch_threads

    set_torch_threads(cfg.torch_threads, print)  # a number, auto, or torch's default
    tasks = load_split(write_eval_tasks(cfg.eval, cfg.env, get_task_space(cfg.env.id), Path(tempfile.mkdtemp())))
    sampling = SamplingParams(temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens, seed=1)
    print(f"{len(tasks)} held-out tasks x {args.samples} sampled first replies")
    for model in args.models:
        policy = HFPolicy(model)
        listed_share, evenness = [], []
        for spec in tasks:
            env = ChatEnv(gym.make(cfg.env.id, **cfg.env.env_kwargs), **cfg.env.chat.kwargs())
            prompt, info = env.reset(options={"task": spec})
            moves = [a for a in info["admissible_actions"] if a.startswith("go to ")]
            replies = collections.Counter(c.text.strip() for c in policy.generate([prompt] * args.samples, sampling))
            counts = [replies[m] for m in moves if replies[m]]
            listed = sum(counts)
            listed_share.append(listed / args.samples)
            if listed and len(moves) > 1:
                evenness.append(-sum(n / listed * math.log(n / listed) for n in counts) / math.log(len(moves)))
        print(f"{model}: replies naming a listed receptacle {sum(listed_share) / len(listed_share):.3f}, "
              f"evenness over listed {sum(evenness) / max(len(evenness), 1):.3f}")


if __name__ == "__main__":
    main()
