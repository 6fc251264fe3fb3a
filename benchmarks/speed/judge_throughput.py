"""Judge throughput (episodes judged per second) and cache hit rate on the CPU tiny model.

Episodes: Briefing-v0 train tasks played in groups by the oracle (every episode of a group is the
same text, as a converged policy's often are) and by a random policy (all different). The judge is
a tiny model built from Briefing's texts, greedy, `--new-tokens` per answer; an untrained tiny
model rarely writes a 'Score:' line, so most answers are "no verdict" (counted; the figure here
is the cost of judging, not its quality). Three passes:

    cold      a fresh cache: duplicates within the batch are asked once
    repeat    the same batch again (e.g. a re-run or an evaluation of the same episodes)
    next      a new batch of the same tasks (a next iteration: the oracle's episodes repeat)

    python benchmarks/speed/judge_throughput.py --tasks 8 --group 4
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

import agentgym  # noqa: F401
from agentgym.chat import ChatConfig
from agentgym.envs.briefing.tasks import BriefingTaskSpace
from agentgym.policies.base import SamplingParams
from agentgym.policies.hf import HFPolicy
from agentgym.policies.scripted import OraclePolicy, RandomPolicy
from agentgym.policies.tiny import build_tiny_model
from agentgym.trainers.run_setup import collect_env_texts
from agentgym.rewards import JudgeReward, RelativeJudge
from agentgym.rollout import collect


def episodes(tasks, group, seed):
    env = "agentgym/Briefing-v0"
    chat = ChatConfig(parser="json")
    oracle = collect(env, tasks, OraclePolicy(BriefingTaskSpace()), group, seed=seed, chat=chat, max_turns=12)
    rand = collect(env, tasks, RandomPolicy(seed), group, seed=seed + 1, chat=chat, max_turns=4)
    for t in rand:
        t.group_id += "-random"
    return oracle + rand


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--model", default=None, help="a judge model folder (default: build a tiny one)")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    space = BriefingTaskSpace()
    tasks = space.split("train")[: args.tasks]
    model = args.model or build_tiny_model(tempfile.mkdtemp(prefix="judge_tiny_"), env_id="agentgym/Briefing-v0",
                                           texts=collect_env_texts("agentgym/Briefing-v0", num_tasks=24))
    policy = HFPolicy(model)
    judge = JudgeReward(policy, sampling=SamplingParams(temperature=0.0, max_new_tokens=args.new_tokens))
    batch = episodes(tasks, args.group, seed=0)
    later = episodes(tasks, args.group, seed=100)
    print(f"judge: tiny model {model}, {args.new_tokens} new tokens per answer; "
          f"{len(batch)} episodes per batch ({args.tasks} tasks x {args.group} oracle + {args.group} random)")
    print("| pass | episodes | answers generated | seconds | episodes/s | cache hit rate | no verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, trajs in (("cold", batch), ("repeat", batch), ("next", later)):
        hits, misses = judge.cache.hits, judge.cache.misses
        t0 = time.perf_counter()
        verdicts = judge.score(trajs)
        dt = time.perf_counter() - t0
        hits, misses = judge.cache.hits - hits, judge.cache.misses - misses
        print(f"| {name} | {len(trajs)} | {misses} | {dt:.2f} | {len(trajs) / dt:.1f} | {hits / len(trajs):.2f} | "
              f"{sum(not v.has_verdict for v in verdicts)} |")
    rel = RelativeJudge(JudgeReward(policy, sampling=SamplingParams(temperature=0.0, max_new_tokens=args.new_tokens * 2)))
    t0 = time.perf_counter()
    rel.score(batch)
    dt = time.perf_counter() - t0
    groups = len({t.group_id for t in batch})
    print(f"relative judge (one call per group): {groups} groups, {len(batch)} episodes in {dt:.2f} s = "
          f"{len(batch) / dt:.1f} episodes/s")


if __name__ == "__main__":
    main()
