"""RLVMR's meta-reasoning rewards on household: outcome-only GiGPO against GiGPO with the rewards.

Learner: credit_assignment.py's FAST CONTROLLED LEARNER (an action scorer over the admissible
actions, not an LLM), its shared behaviour-cloned warm start, its rollouts (agentgym.collect on
household medium, six task types, 30-step limit), GiGPO advantages and ppo_clip_loss. The one
difference between the arms: in `meta`, agentgym.rewards.meta_reasoning adds its rule rewards to
the step rewards before the advantages (GiGPO's step returns carry them).

A scorer picks actions, not words, so it cannot write tags: a FIXED TAGGER stands in for them
(first step and object manipulations -> <planning>, `go to` -> <explore>, look / inventory /
examine -> <monitor>, a step after a failed action -> <reflection>; every action here is
admissible, so reflection never fires). What is measured is the rules' credit for what the
agent does, not the agent's choice of tags.

Reported per seed: final held-out success and the redundant-step rate (share of steps that lead
back to a state already visited in the episode) of the held-out episodes; paired differences
(meta - outcome) over seeds with a t interval.

    python benchmarks/learning/meta_reasoning_household.py                      # 3 seeds, ~10-20 min on 2 shared cores
    python benchmarks/learning/meta_reasoning_household.py --quick --runs /tmp/m # smoke run

Any credit_assignment.py option works too (--iterations, --eval-tasks, ...). Resumable: finished
(arm, seed) runs are kept in --runs/runs.json and skipped on a re-run; the coefficients are kept in
--runs/settings.json, and other coefficients in the same folder are refused (use another --runs):

    python benchmarks/learning/meta_reasoning_household.py --explore 0.02 --planning 0.02 --reflection 0.02 \
        --runs runs/meta_reasoning_small
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports

from benchmarks.learning import credit_assignment as ca  # noqa: E402

from agentgym.rewards.meta_reasoning import MetaReasoningConfig, apply_meta_rewards, redundant_step_rate  # noqa: E402

IDLE = ("look", "inventory", "examine")


def tag_for(step, previous) -> str:
    action = step.action or step.text
    if previous is not None and not previous.action_valid:
        return "reflection"
    if previous is None:
        return "planning"
    if action.startswith("go to"):
        return "explore"
    if action.split(" ")[0] in IDLE:
        return "monitor"
    return "planning"


def tag_steps(trajectories) -> None:
    """The fixed tagger: rewrite each step's text as a tagged reply around its action."""
    for t in trajectories:
        prev = None
        for s in t.steps:
            tag = tag_for(s, prev)
            s.text = f"<{tag}>{tag}</{tag}><action>{s.action or s.text}</action>"
            prev = s


EVAL_LOG: list[dict] = []


def evaluate_with_redundancy(scorer, tasks, args, seed: int, episodes: int | None = None) -> float:
    """credit_assignment.evaluate, also recording the held-out episodes' redundant-step rate."""
    from benchmarks.learning.action_scorer import ScorerPolicy
    from agentgym.rollout import collect

    policy = ScorerPolicy(scorer, seed=seed, record=False)
    trajs = collect(ca.ENV_ID, tasks, policy, episodes or args.eval_episodes, seed=seed,
                    env_kwargs={"max_episode_steps": args.max_steps}, chat=ca.chat_options(args.memory),
                    record_messages=False)
    success = float(np.mean([t.success for t in trajs]))
    EVAL_LOG.append({"success": success, "redundant": redundant_step_rate(trajs),
                     "steps": float(np.mean([len(t.steps) for t in trajs]))})
    return success


def run_arm(arm: str, seed: int, warm, space, eval_set, args, log, warm_heldout: float, meta_cfg) -> dict:
    import agentgym.trainers.estimators as est

    original = est.compute_advantages
    totals = {"steps": 0, "meta_reward_sum": 0.0}

    def with_meta(trajectories, cfg=None, values=None, progress=None):
        if arm == "meta":
            tag_steps(trajectories)
            counts = apply_meta_rewards(trajectories, meta_cfg)
            totals["steps"] += counts["steps"]
            totals["meta_reward_sum"] += counts["meta_reward_sum"]
        return original(trajectories, cfg, values=values, progress=progress)

    est.compute_advantages, ca.evaluate = with_meta, evaluate_with_redundancy
    EVAL_LOG.clear()
    try:
        result = ca.rl_run("gigpo", seed, warm, space, eval_set, args, log, warm_heldout)
    finally:
        est.compute_advantages = original
    final = EVAL_LOG[-1]
    return {"arm": arm, "seed": seed, "final": result["final"], "redundant": final["redundant"],
            "mean_steps": final["steps"], "seconds": result["seconds"],
            "meta_reward_per_step": totals["meta_reward_sum"] / max(totals["steps"], 1)}


def parse_args():
    """Our options, then credit_assignment.py's own (its parser, through its main with the run
    captured), so the two benchmarks share every setting and default."""
    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--runs", default="runs/meta_reasoning", help="folder for runs.json (resumable)")
    ours.add_argument("--explore", type=float, default=0.1)
    ours.add_argument("--planning", type=float, default=0.1)
    ours.add_argument("--reflection", type=float, default=0.1)
    mine, rest = ours.parse_known_args()
    if "--seeds" not in rest:
        rest += ["--seeds", "3"]
    captured = {}
    scorer_main = ca.scorer_main
    ca.scorer_main = lambda a: captured.setdefault("args", a)
    argv, sys.argv = sys.argv, [sys.argv[0], *rest]
    try:
        ca.main()
    finally:
        ca.scorer_main, sys.argv = scorer_main, argv
    args = captured["args"]
    for k, v in vars(mine).items():
        setattr(args, k, v)
    return args


def start(args, log):
    """What both household reward benchmarks start from: the runs finished so far (runs.json), the
    held-out set and the shared behaviour-cloned warm start with its held-out success."""
    import torch

    torch.set_num_threads(1)
    from benchmarks.learning.action_scorer import ActionScorer
    from agentgym.registration import get_task_space

    out = Path(args.runs)
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "runs.json"
    done = json.loads(raw.read_text()) if raw.exists() else []
    space = get_task_space(ca.ENV_ID)
    eval_set = ca.heldout_tasks(space, args.eval_tasks)
    torch.manual_seed(0)
    scorer = ActionScorer(args.buckets, args.dim, args.hidden)
    warm = ca.behaviour_clone(scorer, space, args, log)
    warm_heldout = evaluate_with_redundancy(scorer, eval_set, args, seed=10_000)
    log(f"warm start held-out success {warm_heldout:.3f}, redundant-step rate {EVAL_LOG[-1]['redundant']:.3f}")
    return raw, done, space, eval_set, warm, warm_heldout


def main() -> None:
    args = parse_args()
    log = lambda s: print(s, flush=True)  # noqa: E731
    # runs are resumed by (arm, seed): other coefficients need another --runs folder, or their table
    # would be the old coefficients' runs
    from benchmarks.harness import jobs as rr

    rr.check_settings(Path(args.runs), {"planning": args.planning, "explore": args.explore,
                                        "reflection": args.reflection})
    raw, done, space, eval_set, warm, warm_heldout = start(args, log)
    meta_cfg = MetaReasoningConfig(planning=args.planning, explore=args.explore, reflection=args.reflection,
                                   format_penalty=0.0, weight=1.0)
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        for arm in ("outcome", "meta"):
            if any(r["arm"] == arm and r["seed"] == seed for r in done):
                continue
            r = run_arm(arm, seed, warm, space, eval_set, args, log, warm_heldout, meta_cfg)
            log(f"{arm} seed {seed}: held-out {r['final']:.3f}, redundant-step rate {r['redundant']:.3f}, "
                f"mean steps {r['mean_steps']:.1f}, meta reward per step {r['meta_reward_per_step']:.3f} "
                f"({r['seconds']:.0f}s)")
            done.append(r)
            raw.write_text(json.dumps(done, indent=1))
    table(done, warm_heldout, args)
    print(f"{raw}; {time.perf_counter() - t0:.0f}s")


def table(done: list, warm_heldout: float, args) -> None:
    seeds = sorted({r["seed"] for r in done if any(o["seed"] == r["seed"] and o["arm"] != r["arm"] for o in done)})
    print()
    print(f"warm start {warm_heldout:.3f}; {args.iterations} GiGPO iterations x {args.tasks_per_iter} tasks x group "
          f"{args.group_size}; held-out {args.eval_tasks} tasks x {args.eval_episodes}")
    print("| seed | held-out outcome-only | held-out + meta rewards | redundant-step rate outcome-only | + meta rewards |")
    print("| --- | --- | --- | --- | --- |")
    by = {(r["arm"], r["seed"]): r for r in done}
    for s in seeds:
        o, m = by[("outcome", s)], by[("meta", s)]
        print(f"| {s} | {o['final']:.3f} | {m['final']:.3f} | {o['redundant']:.3f} | {m['redundant']:.3f} |")
    if len(seeds) >= 2:
        for key, name in (("final", "held-out success"), ("redundant", "redundant-step rate")):
            diff = [by[("meta", s)][key] - by[("outcome", s)][key] for s in seeds]
            mean, lo, hi = ca.t_ci(diff)
            print(f"paired difference (meta - outcome), {name}: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] over {len(seeds)} seeds")


if __name__ == "__main__":
    main()
