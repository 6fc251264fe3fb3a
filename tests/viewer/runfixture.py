"""A small run dir for the viewer tests, written by the same code the trainer uses (trainers/records.py):
household episodes of a policy that plays the oracle in even episodes and at random in odd ones
(so groups hold successes, failures, invalid steps and shared anchor states), one infra error,
GiGPO advantages, per-token logprobs, a metrics.jsonl and two evaluation reports."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np

import agentgym
from agentgym.policies.base import Completion
from agentgym.policies.scripted import OraclePolicy, RandomPolicy
from agentgym.trajectory import save_trajectories

ENV = "agentgym/Household-v0"
_WORD = re.compile(r"\S+\s*|\s+")


def token_id(piece: str) -> int:
    return zlib.crc32(piece.encode()) % 50_000


class MixedPolicy:
    """Oracle in even episode slots, random in odd ones; 'tokens' are words with made-up logprobs."""

    def __init__(self, space, seed: int = 0):
        self.oracle = OraclePolicy(space)
        self.random = RandomPolicy(seed=seed)
        self.vocab: dict[int, str] = {}

    def generate(self, prompts, sampling=None, contexts=None):
        out = []
        for prompt, ctx in zip(prompts, contexts):
            pick = self.oracle if int(ctx.episode) % 2 == 0 else self.random
            comp = pick.generate([prompt], sampling, [ctx])[0]
            if pick is self.random and ctx.turn % 4 == 3:
                comp = Completion(text=ctx.format_action("dance on the table"))  # an invalid step
            pieces = _WORD.findall(comp.text)
            ids = [token_id(p) for p in pieces]
            self.vocab.update(zip(ids, pieces))
            logprobs = [-0.01 - ((i * 0.37 + len(p)) % 3.0) for i, p in enumerate(pieces)]
            out.append(Completion(text=comp.text, prompt_ids=list(range(40 + ctx.turn)), response_ids=ids,
                                  response_logprobs=logprobs))
        return out


def make_run(root: Path, tasks: int = 3, group_size: int = 4, max_turns: int = 12) -> Path:
    from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
    from agentgym.evaluation.evaluate import compute_metrics
    from agentgym.trainers.records import annotate, eval_dir, train_path
    from agentgym.evaluation.report import write_report

    run = root / "run"
    run.mkdir(parents=True)
    space = agentgym.get_task_space(ENV)
    task_list = space.split("train")[:tasks]
    policy = MixedPolicy(space)
    trajs = agentgym.collect(ENV, task_list, policy, group_size, seed=3, max_turns=max_turns)
    trajs[-1].infra_error, trajs[-1].error = True, "step failed: worker died (test)"
    est = EstimatorConfig(name="gigpo", gamma=0.9, omega=1.0, norm_std=True)
    advantages = compute_advantages(trajs, est)
    annotate(trajs, iteration=5, advantages=advantages, est_cfg=est, decode=policy.vocab.__getitem__)
    save_trajectories(train_path(run, 5), trajs)

    (run / "config.yaml").write_text(f"name: run\nenv:\n  id: {ENV}\nestimator:\n  name: gigpo\n")
    with (run / "metrics.jsonl").open("w") as f:
        for step in range(1, 11):
            f.write(json.dumps({"step": step, "time": 0.0, "rollout/success_rate": 0.1 * step,
                                "adv/abs_mean": 1.0 / step, "train/pg_loss": float(np.sin(step))}) + "\n")
            if step % 5 == 0:
                f.write(json.dumps({"step": step, "time": 0.0, "eval/success_rate": 0.05 * step}) + "\n")
    for iteration, policy_eval in ((0, RandomPolicy(seed=1)), (10, OraclePolicy(space))):
        ev = agentgym.collect(ENV, space.split("heldout")[:4], policy_eval, 1, seed=100, max_turns=max_turns)
        result = compute_metrics(ev, categories={t.task_id: space.category(t) for t in space.split("heldout")[:4]},
                                 env_id=ENV, split="heldout", policy=type(policy_eval).__name__)
        annotate(result.trajectories, iteration=iteration)
        write_report(result, eval_dir(run, iteration), plot=False, save_trajectories=True)
    return run


def load_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
