"""A rubric reward in training, with the judged and the verifiable reward side by side.

Same learner, warm start and rollouts as meta_reasoning_household.py (credit_assignment.py's fast
controlled learner on household medium, GiGPO). The episode outcome GiGPO trains on is a rubric's
score (agentgym.rewards.apply_reward, combine=replace): solved (weight 3, the env's verdict),
at most 15 steps (1), no idle look / inventory / examine (1). Every criterion is checked by code:
no judge model runs here (an untrained tiny judge gives no verdicts; see benchmarks/speed/judge_throughput.py).
Each iteration logs the rubric ("judged") mean, the env's own score ("verifiable") mean and their
correlation (agentgym.rewards.divergence), the numbers a judged run watches for hacking.

    python benchmarks/learning/rubric_reward_household.py                  # 3 seeds
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports

from benchmarks.learning import credit_assignment as ca  # noqa: E402
from benchmarks.learning import meta_reasoning_household as mr  # noqa: E402

from agentgym.rewards import Criterion, Rubric, apply_reward  # noqa: E402

RUBRIC = Rubric([
    Criterion("solved", 3.0, "the task is done", check=lambda t: bool(t.success)),
    Criterion("efficient", 1.0, "at most 15 steps", check=lambda t: len(t.steps) <= 15),
    Criterion("no_idling", 1.0, "never looks around idly",
              check=lambda t: not any((s.action or "").split(" ")[0] in mr.IDLE for s in t.steps)),
], name="household_rubric")


def run(seed, warm, space, eval_set, args, log, warm_heldout) -> dict:
    import agentgym.trainers.estimators as est

    original = est.compute_advantages
    curve = []

    def with_rubric(trajectories, cfg=None, values=None, progress=None):
        stats = apply_reward(trajectories, RUBRIC, how="replace").as_dict()
        curve.append({k: stats.get(k) for k in ("judged_mean", "verifiable_mean", "correlation", "disagree_rate")})
        return original(trajectories, dataclasses.replace(cfg, outcome="score"), values=values, progress=progress)

    est.compute_advantages, ca.evaluate = with_rubric, mr.evaluate_with_redundancy
    mr.EVAL_LOG.clear()
    try:
        result = ca.rl_run("gigpo", seed, warm, space, eval_set, args, log, warm_heldout)
    finally:
        est.compute_advantages = original
    return {"seed": seed, "final": result["final"], "redundant": mr.EVAL_LOG[-1]["redundant"],
            "mean_steps": mr.EVAL_LOG[-1]["steps"], "curve": curve, "seconds": result["seconds"]}


def main() -> None:
    sys.argv += [] if "--runs" in sys.argv else ["--runs", "runs/rubric_reward"]
    args = mr.parse_args()
    log = lambda s: print(s, flush=True)  # noqa: E731
    raw, done, space, eval_set, warm, warm_heldout = mr.start(args, log)
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        if any(r["seed"] == seed for r in done):
            continue
        r = run(seed, warm, space, eval_set, args, log, warm_heldout)
        log(f"rubric seed {seed}: held-out success {r['final']:.3f}, redundant-step rate {r['redundant']:.3f}")
        done.append(r)
        raw.write_text(json.dumps(done, indent=1))
    print(f"\nwarm start held-out success {warm_heldout:.3f}")
    print("| seed | iteration | rubric (judged) mean | env score (verifiable) mean | correlation | pass/fail disagreement |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in sorted(done, key=lambda r: r["seed"]):
        for it, c in enumerate(r["curve"]):
            if it in (0, len(r["curve"]) // 2, len(r["curve"]) - 1):
                print(f"| {r['seed']} | {it + 1} | {c['judged_mean']:.3f} | {c['verifiable_mean']:.3f} | "
                      f"{c['correlation']:.2f} | {c['disagree_rate']:.2f} |")
    finals = [r["final"] for r in done]
    print(f"held-out success after training on the rubric: {np.mean(finals):.3f} over {len(finals)} seeds "
          f"({', '.join(f'{x:.3f}' for x in finals)}); {raw}; {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
