"""Does a curriculum beat uniform sampling on ALFWorld-v0 (issue 49)? The alfworld-tiny preset,
its arms differing only in which training games they play, the same compute (iterations x
tasks_per_iter x group_size), 5 seeds, each seed's arms from one shared warm start:

    uniform       tasks.source=split,  curriculum uniform       (ALFWorld-v0's 960 train games)
    sec / dump / learnability          the same games, picked by that curriculum
    evolve_sec    tasks.source=evolve, curriculum sec           (the preset: the self-evolving generator)

Final evaluations only (the runs' last held-out evaluation, heldout_unseen, plus heldout):
differences to uniform paired per task within a seed and pooled, and the t-interval over seeds.

    python benchmarks/learning/alfworld_curriculum.py --seeds 0 1 2 3 4 --parallel 2      # resumable: rerun to go on
    python benchmarks/learning/alfworld_curriculum.py --report-only
    python benchmarks/learning/alfworld_curriculum.py --seeds 0 --runs /tmp/c --out /tmp/c.json -- iterations=1 \
        sft.num_tasks=8 tiny.num_tasks=4 eval.num_tasks=6                          # smoke

Writes --out (docs/alfworld_curriculum.json) after every finished run: per arm the seeds, final
success, before RL, compute (optimizer steps, tokens), and `differences` {"<arm> - uniform": ...}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PRESET = "alfworld-tiny"
ARMS = {
    "uniform": ["tasks.source=split", "tasks.curriculum=uniform"],
    "sec": ["tasks.source=split", "tasks.curriculum=sec"],
    "dump": ["tasks.source=split", "tasks.curriculum=dump"],
    "learnability": ["tasks.source=split", "tasks.curriculum=learnability"],
    "evolve_sec": ["tasks.source=evolve", "tasks.curriculum=sec"],
}


def config(args, seed: int, folder: Path, *extra: str):
    from agentgym.trainers.config import load_config

    threads = [f"torch_threads={args.threads}"] if args.threads else []
    return load_config(PRESET, [*args.overrides, f"seed={seed}", f"run_dir={folder}", *threads, *extra])


def jobs(args) -> list[rr.Job]:
    out = [rr.Job(f"warm/seed{s}") for s in args.seeds]
    return out + [rr.Job(f"{arm}/seed{s}", (f"warm/seed{s}",)) for s in args.seeds for arm in args.arms]


def run_job(args, key: str) -> dict:
    table = rr.DoneTable(Path(args.runs) / "done.json")
    folder = rr.job_dir(Path(args.runs), key)
    arm, seed = rr.arm_and_seed(key)
    if arm == "warm":
        return rr.run_warm(config(args, seed, folder), folder)
    cfg = config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]), *ARMS[arm])
    evals = {"heldout": rr.split_file(cfg, "heldout", folder)}
    return {"arm": arm, "seed": seed, **rr.run_rl(cfg, folder, evals)}


def report(args, table: rr.DoneTable) -> dict:
    import numpy as np

    split = config(args, 0, Path(args.runs)).eval.split
    runs = {arm: {s: table[f"{arm}/seed{s}"] for s in args.seeds if f"{arm}/seed{s}" in table} for arm in ARMS}
    arms = {}
    for arm, by_seed in runs.items():
        records = [by_seed[s] for s in sorted(by_seed)]
        finals = [r[split]["success_rate"] for r in records]
        arms[arm] = {"seeds": sorted(by_seed), "finals": finals, "mean": float(np.mean(finals)) if finals else None,
                     "before": [r[f"{split}_before"]["success_rate"] for r in records],
                     "finals_heldout": [r["heldout"]["success_rate"] for r in records],
                     "compute": [{k: r["compute"][k] for k in ("optimizer_steps", "tokens", "rollout_episodes")}
                                 for r in records]}
    differences = {}
    for arm in ARMS:
        seeds = sorted(set(runs[arm]) & set(runs["uniform"])) if arm != "uniform" else []
        if seeds:
            differences[f"{arm} - uniform"] = rr.paired_diff([runs[arm][s][split]["per_task_success"] for s in seeds],
                                                             [runs["uniform"][s][split]["per_task_success"]
                                                              for s in seeds])
    return {"preset": PRESET, "split": split, "overrides": args.overrides, "arms": arms, "differences": differences}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, one thread each when > 1")
    parser.add_argument("--runs", default="runs/alfworld_curriculum")
    parser.add_argument("--out", default=str(ROOT / "docs" / "alfworld_curriculum.json"))
    parser.add_argument("--report-only", action="store_true", help="write --out from the finished runs")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (after --), as for agentgym train")
    args = parser.parse_args()
    bad = [o for o in args.overrides if o.split("=", 1)[0] in ("tasks.source", "tasks.curriculum")]
    if bad:
        parser.error(f"{bad[0]}: the task source and curriculum are this benchmark's arms (ARMS)")
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key))
        return
    rr.check_settings(run_root, {"overrides": args.overrides})
    out, failed = rr.schedule(args, jobs(args), report, __file__, run_root)
    for arm, a in out["arms"].items():
        print(f"{arm:13s} finals {[round(x, 3) for x in a['finals']]} mean {a['mean']}")
    for name, d in out["differences"].items():
        print(f"{name}: {d['diff']:+.3f} {d['ci']} over {d['seeds']} seeds (seed interval {d['seed_ci']})")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
