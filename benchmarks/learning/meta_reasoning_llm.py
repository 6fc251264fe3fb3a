"""RLVMR's meta-reasoning rewards on the main job's LLM (issue 41, item 3), writing
docs/meta_reasoning_llm.json.

The main job (preset household-tiny: a tiny LLM built from household text, SFT on a searching
demonstrator that idles and slips, GiGPO, 12-step episodes) in its tagged layout: every reply is
`<tag>note</tag><action>...</action>` with one of RLVMR's tags (TAGGED below: the tag parser, the
demonstrator's replies tagged by rule, sft.tags; agentgym/rewards/meta_reasoning.py). Two arms from
the same tagged warm start per seed (`warm/seedN`, built once and shared):

    outcome   GiGPO on the env's outcome alone. It runs the meta_reasoning hook at weight 0, which
              adds exactly 0 to every step reward and logs the same reward/... metrics (tag counts,
              malformed replies, redundant_step_rate) as the other arm
    meta      GiGPO with RLVMR's rewards added to the step rewards (planning, explore, reflection at
              --coef, format penalty --format-penalty, weight 1)

Everything else is the preset's and equal across arms: tasks per iteration (seeded by the run's seed),
learning rate, held-out episodes (same seeds). Per run: final held-out success, redundant-step rate
(agentgym.rewards.meta_reasoning.redundant_step_rate on the held-out episodes) and the tags the agent
writes; paired per-task differences (meta - outcome) pooled over seeds (resumable_runs.paired_diff).

Every arm x seed is a checkpointed, resumable job (benchmarks/harness/jobs.py): <runs>/done.json
lists the finished ones, running the script again skips them and resumes the rest, and the JSON is
rewritten after every finished run:

    python benchmarks/learning/meta_reasoning_llm.py --seeds 0 1 2 --parallel 2
    python benchmarks/learning/meta_reasoning_llm.py --seeds 0 1 2 --report-only
    python benchmarks/learning/meta_reasoning_llm.py --quick          # minutes: the path end to end, no figures
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402
from benchmarks.harness import jobs as rr  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PRESET = "household-tiny"
# household-tiny's tagged layout: the reply is one meta-reasoning tag and the action in <action> tags
# (read by the tag parser), the SFT demonstrator's replies tagged by rule (sft.tags), room for the
# tags in the reply (the longest tagged reply is about 15 tokens of the tiny tokenizer).
TAGGED = ["env.chat.parser=tag", "sft.tags=true", "rollout.max_new_tokens=24"]
# checkpoints every 5 iterations; no safety stop (a run is defined by its iterations); the held-out
# episodes are saved (the redundant-step rate and the tags are read from them), training episodes
# only at iteration 1
SETTING = TAGGED + ["checkpoint_every=5", "eval.every=0", "time_budget_s=null", "log.save_trajectories_every=100000",
                    "log.plot=false", "log.tensorboard=false"]
# --quick: a smaller model and enough SFT that its replies are tagged (the path end to end, not a figure)
QUICK = ["iterations=2", "tiny.num_tasks=8", "tiny.hidden=128", "tiny.heads=4", "sft.num_tasks=120", "sft.epochs=3",
         "sft.lr=3.0e-3", "rollout.tasks_per_iter=2",
         "rollout.group_size=4", "eval.num_tasks=6", "eval.episodes_per_task=1", "env.fresh_tasks=200",
         "checkpoint_every=1", "torch_threads=1"]
ARMS = ("outcome", "meta")


def arm_overrides(args, arm: str) -> list[str]:
    weight = 1.0 if arm == "meta" else 0.0
    return [f"env.reward={{kind: meta_reasoning, planning: {args.coef}, explore: {args.coef}, "
            f"reflection: {args.coef}, format_penalty: {args.format_penalty}, weight: {weight}}}"]


def overrides(args) -> list[str]:
    return SETTING + (QUICK if args.quick else []) + args.overrides


def config(args, seed: int, folder: Path, *extra: str):
    from agentgym.trainers.config import load_config

    threads = [f"torch_threads={args.threads}"] if args.threads else []
    return load_config(PRESET, [*overrides(args), f"seed={seed}", f"run_dir={folder}", *threads, *extra])


def jobs(args) -> list[rr.Job]:
    out = [rr.Job(f"warm/seed{s}") for s in args.seeds]
    out += [rr.Job(f"{arm}/seed{s}", (f"warm/seed{s}",)) for s in args.seeds for arm in ARMS]
    return out


# --- what the held-out episodes show ----------------------------------------------------------------
def episode_stats(folder: Path, iteration: int) -> dict:
    """Redundant-step rate (pooled, and per task for the paired interval), the share of each tag and of
    malformed replies, on the held-out episodes the trainer saved after `iteration` (0 = before RL)."""
    from collections import defaultdict

    from agentgym.rewards.meta_reasoning import TAGS, parse_tags, redundant_step_rate
    from agentgym.trainers.records import eval_dir
    from agentgym.trajectory import load_trajectories

    path = eval_dir(folder, iteration) / "trajectories.jsonl"
    trajs = [t for t in load_trajectories(path) if not t.infra_error]
    by_task = defaultdict(list)
    for t in trajs:
        by_task[t.task_id].append(t)
    parsed = [parse_tags(s.text) for t in trajs for s in t.steps]
    n = max(len(parsed), 1)
    return {"iteration": iteration, "episodes": len(trajs), "redundant_step_rate": redundant_step_rate(trajs),
            "per_task_redundant": {task: redundant_step_rate(ts) for task, ts in by_task.items()},
            "tag_shares": {tag: sum(p.tag == tag and p.well_formed for p in parsed) / n for tag in TAGS},
            "malformed_share": sum(not p.well_formed for p in parsed) / n}


def last_reward_metrics(folder: Path) -> dict:
    """The reward/... metrics of the run's last iteration (metrics.jsonl)."""
    from agentgym.trainers.logging_utils import read_metrics

    rows = [r for r in read_metrics(folder) if any(k.startswith("reward/") for k in r)]
    return {k: v for k, v in rows[-1].items() if k.startswith("reward/")} if rows else {}


def run_job(args, key: str) -> dict:
    import json

    from agentgym.trainers.checkpoint import latest_checkpoint

    table = rr.DoneTable(Path(args.runs) / "done.json")
    folder = rr.job_dir(Path(args.runs), key)
    arm, seed = rr.arm_and_seed(key)
    if arm == "warm":
        return rr.run_warm(config(args, seed, folder), folder)
    cfg = config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]), *arm_overrides(args, arm))
    out = {"arm": arm, "seed": seed, **rr.run_rl(cfg, folder, {})}
    evals = json.loads((latest_checkpoint(folder) / "state.json").read_text())["evals"]
    out["episodes_before"] = episode_stats(folder, evals[0]["iteration"])
    out["episodes_final"] = episode_stats(folder, evals[-1]["iteration"])
    out["reward_metrics_last"] = last_reward_metrics(folder)
    return out


def report(args, table: rr.DoneTable) -> dict:
    import numpy as np

    runs = {arm: {s: table[f"{arm}/seed{s}"] for s in args.seeds if f"{arm}/seed{s}" in table} for arm in ARMS}
    arms = {}
    for arm, by_seed in runs.items():
        records = [by_seed[s] for s in sorted(by_seed)]
        finals = [r["heldout"]["success_rate"] for r in records]
        redundant = [r["episodes_final"]["redundant_step_rate"] for r in records]
        arms[arm] = {
            "seeds": sorted(by_seed), "finals": finals, "mean": float(np.mean(finals)) if finals else None,
            "redundant_step_rate": redundant, "redundant_mean": float(np.mean(redundant)) if redundant else None,
            "before": [r["heldout_before"]["success_rate"] for r in records],
            "redundant_before": [r["episodes_before"]["redundant_step_rate"] for r in records],
            "tag_shares": [r["episodes_final"]["tag_shares"] for r in records],
            "malformed_share": [r["episodes_final"]["malformed_share"] for r in records],
            "invalid_action_rate": [r["heldout"]["invalid_action_rate"] for r in records],
            "reward_metrics_last": [r["reward_metrics_last"] for r in records],
            "compute": [r["compute"] for r in records], "rl_seconds": [r["rl_seconds"] for r in records],
        }
    seeds = sorted(set(runs["meta"]) & set(runs["outcome"]))
    differences = {}
    if seeds:
        meta, outcome = [runs["meta"][s] for s in seeds], [runs["outcome"][s] for s in seeds]
        differences["success (meta - outcome)"] = rr.paired_diff(
            [r["heldout"]["per_task_success"] for r in meta], [r["heldout"]["per_task_success"] for r in outcome])
        differences["redundant_step_rate (meta - outcome)"] = rr.paired_diff(
            [r["episodes_final"]["per_task_redundant"] for r in meta],
            [r["episodes_final"]["per_task_redundant"] for r in outcome])
    any_run = next((r for by_seed in runs.values() for r in by_seed.values()), None)
    n_tasks = len(any_run["heldout"]["per_task_success"]) if any_run else None
    episodes = config(args, 0, Path(args.runs)).eval.episodes_per_task
    all_jobs = jobs(args)
    return {
        "command": command(__file__, sys.argv[1:]),
        "setting": {"preset": PRESET, "overrides": overrides(args), "arms": {a: arm_overrides(args, a) for a in ARMS}},
        "quick": bool(args.quick), "heldout_tasks": n_tasks, "episodes_per_task": episodes,
        "arms": arms, "differences": differences,
        "power": rr.power_statement(n_tasks, episodes, len(seeds)) if n_tasks and seeds else None,
        "runs_done": f"{sum(j.key in table for j in all_jobs)} of {len(all_jobs)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0 1 2 (0 with --quick)")
    parser.add_argument("--coef", type=float, default=0.1,
                        help="planning, explore and reflection reward (the outcome is 1; default 0.1)")
    parser.add_argument("--format-penalty", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true",
                        help="tiny runs (2 iterations, 6 held-out tasks) into /tmp: the path end to end, no figures")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, one thread each when > 1")
    parser.add_argument("--runs", default=None, help="default runs/meta_reasoning_llm (/tmp/... with --quick)")
    parser.add_argument("--out", default=None, help="default docs/meta_reasoning_llm.json (/tmp/... with --quick)")
    parser.add_argument("--report-only", action="store_true", help="write --out from the finished runs")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (after --), as for agentgym train")
    args = parser.parse_args()
    args.seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    args.runs = args.runs or ("/tmp/meta_reasoning_llm_quick" if args.quick else "runs/meta_reasoning_llm")
    args.out = args.out or ("/tmp/meta_reasoning_llm_quick.json" if args.quick else
                            str(ROOT / "docs" / "meta_reasoning_llm.json"))
    bad = [o for o in args.overrides if o.split("=", 1)[0] in ("env.reward", "sft.tags", "env.chat.parser")]
    if bad:
        parser.error(f"{bad[0]}: the arms' reward and the tagged layout are this benchmark's (--coef, TAGGED)")
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key))
        return
    rr.check_settings(run_root, {"overrides": overrides(args), "coef": args.coef, "format_penalty": args.format_penalty})
    out, failed = rr.schedule(args, jobs(args), report, __file__, run_root)
    for arm, a in out["arms"].items():
        print(f"{arm:8s} held-out {[round(x, 3) for x in a['finals']]} (before {[round(x, 3) for x in a['before']]}) "
              f"redundant {[round(x, 3) for x in a['redundant_step_rate']]} tags {a['tag_shares']}")
        for seed, metrics in zip(a["seeds"], a["reward_metrics_last"]):
            print(f"{arm:8s} seed {seed} last iteration: " + " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items())))
    for name, d in out["differences"].items():
        print(f"{name:38s} {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] ({d['seeds']} seeds, {d['pairs']} pairs)")
    print(f"{out['runs_done']} runs done; wrote {args.out}")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
