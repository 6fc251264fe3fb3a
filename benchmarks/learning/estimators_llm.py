"""Advantage estimators on an LLM policy at matched normalization (issue 35), writing
docs/estimators_llm.json.

    gigpo          episode + step advantage (estimator.name=gigpo, omega=1)
    gigpo_omega0   the same with the step term off (omega=0): what the step term alone adds
    grpo           the episode advantage of GiGPO (estimator.name=grpo)
    rloo           leave-one-out baseline (estimator.name=rloo)

Without std normalization GRPO's advantage is GiGPO's episode term, so grpo and gigpo_omega0 are
one algorithm: their runs agree bit for bit (seed 0: the same 0.3077 held-out, the same invalid
rate and steps). grpo is run on the first GRPO_CHECK_SEEDS seeds as that check only; when they agree,
its other seeds are gigpo_omega0's (the JSON says so under grpo_is_gigpo_omega0), which saves a
sixth of the compute for nothing lost.

Matched normalization: every estimator runs with estimator.norm_std=false (no division by the
group's std; RLOO never divides, so this is the only setting all four share), so differences are
the estimators', not the normalization's. Everything else is the preset's and equal across
estimators: the same warm start per seed (`warm/seedN`, built once and shared), the same tasks per
iteration (the task source is uniform and seeded by the run's seed alone), the same learning
rate, the same held-out episodes. The setting is rl_vs_baselines.py's (a demonstrator idling with
probability 0.6, unfiltered SFT, the 12-step limit) unless overrides change it.

Every estimator x seed is a resumable job (benchmarks/harness/jobs.py): <runs>/done.json lists
the finished ones, running the script again skips them and resumes the rest. The JSON is written
from whatever has finished:

    heldout_tasks, episodes_per_task, norm_std,
    estimators.<name>: {seeds, finals, finals_unseen, mean, credit_last, credit_by_phase}
    differences: {"gigpo - grpo": {diff, ci, pairs, seeds}, ...}   (paired per task, pooled over seeds)
    power: what the seeds x held-out set can detect at 80%

    python benchmarks/learning/estimators_llm.py --seeds 0 1 2 3 4 5 --parallel 2 --warm-runs runs/rl_vs_baselines
    python benchmarks/learning/estimators_llm.py --seeds 0 1 2 3 4 5 --report-only
    python benchmarks/learning/estimators_llm.py --seeds 0 --runs /tmp/e --out /tmp/e.json -- iterations=1 ...  # smoke

docs/estimators_llm.json: the same with `-- torch_threads=1 rollout.admissible_only=true` (every
policy decodes within the admissible actions, as in docs/rl_vs_baselines.json, whose RL arm is
exactly this script's gigpo: seeds 0-4 were shared); free decoding in
docs/estimators_llm_free_decoding.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.learning.rl_vs_baselines import PRESET, SETTING  # noqa: E402  (the same setting)

ROOT = Path(__file__).resolve().parents[2]
NORM = ["estimator.norm_std=false"]
ESTIMATORS = {
    "gigpo": ["estimator.name=gigpo", "estimator.omega=1.0"],
    "gigpo_omega0": ["estimator.name=gigpo", "estimator.omega=0.0"],
    "grpo": ["estimator.name=grpo"],
    "rloo": ["estimator.name=rloo"],
}
# the contrasts of the issue: the whole method, the step term alone, against RLOO, and the two
# episode-level baselines against each other
CONTRASTS = [("gigpo", "grpo"), ("gigpo", "gigpo_omega0"), ("gigpo", "rloo"), ("gigpo_omega0", "grpo"),
             ("grpo", "rloo")]


def config(args, seed: int, folder: Path, *extra: str):
    from agentgym.trainers.config import load_config

    threads = [f"torch_threads={args.threads}"] if args.threads else []
    return load_config(PRESET, [*SETTING, *args.overrides, *NORM, f"seed={seed}", f"run_dir={folder}", *threads,
                                *extra])


GRPO_CHECK_SEEDS = 2  # grpo == gigpo_omega0 at norm_std=false: checked on this many seeds, not rerun on the others


def jobs(args) -> list[rr.Job]:
    out = [rr.Job(f"warm/seed{s}") for s in args.seeds]
    out += [rr.Job(f"{name}/seed{s}", (f"warm/seed{s}",)) for s in args.seeds for name in args.estimators
            if name != "grpo" or s in args.seeds[:GRPO_CHECK_SEEDS]]
    return out


def _same_run(a: dict, b: dict) -> bool:
    return a["heldout"] == b["heldout"] and a.get("heldout_unseen") == b.get("heldout_unseen")


def run_job(args, key: str) -> dict:
    table = rr.DoneTable(Path(args.runs) / "done.json")
    folder = rr.job_dir(Path(args.runs), key)
    kind, seed = rr.arm_and_seed(key)
    if kind == "warm":  # --warm-runs: build (or reuse, when its settings match) rl_vs_baselines.py's
        shared = Path(args.warm_runs) / key if args.warm_runs else folder
        cfg = config(args, seed, shared)
        if args.warm_runs:
            rr.check_shared_warm(cfg, shared)
        return rr.run_warm(cfg, shared)
    cfg = config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]), *ESTIMATORS[kind])
    evals = {"heldout_unseen": rr.split_file(cfg, "heldout_unseen", folder)}
    return {"estimator": kind, "seed": seed, "norm_std": cfg.estimator.norm_std, **rr.run_rl(cfg, folder, evals)}


PHASES = ((1, 10), (11, 20), (21, 40), (41, 60))  # iterations, inclusive: early training is where idling is unlearned
PHASE_KEYS = ("idle_frac", "adv_step/useful", "adv_step/idle", "adv_episode/useful", "adv_episode/idle")


def credit_by_phase(curves: list[list[dict]]) -> dict:
    """Per phase of training, the mean over seeds and iterations of what the step and episode terms
    give useful and idle steps (the runs' credit/ metrics): where the step term's credit goes."""
    out = {}
    for first, last in PHASES:
        rows = [row for curve in curves for row in curve if first <= row["iteration"] <= last]
        values = {k: [row[k] for row in rows if isinstance(row.get(k), (int, float))] for k in PHASE_KEYS}
        out[f"{first}-{last}"] = {k: sum(v) / len(v) if v else None for k, v in values.items()}
    return out


def report(args, table: rr.DoneTable) -> dict:
    import numpy as np

    runs = {name: {s: table[f"{name}/seed{s}"] for s in args.seeds if f"{name}/seed{s}" in table}
            for name in ESTIMATORS}
    checked = sorted(set(runs["grpo"]) & set(runs["gigpo_omega0"]))
    identical = bool(checked) and all(_same_run(runs["grpo"][s], runs["gigpo_omega0"][s]) for s in checked)
    if identical:  # the same algorithm: the seeds not rerun are gigpo_omega0's
        runs["grpo"] = {**runs["gigpo_omega0"], **runs["grpo"]}
    estimators = {}
    for name, by_seed in runs.items():
        records = [by_seed[s] for s in sorted(by_seed)]
        finals = [r["heldout"]["success_rate"] for r in records]
        estimators[name] = {
            "seeds": sorted(by_seed), "finals": finals,
            "finals_unseen": [r["heldout_unseen"]["success_rate"] for r in records],
            "mean": float(np.mean(finals)) if finals else None,
            "before": [r["heldout_before"]["success_rate"] for r in records],
            "credit_last": [r["credit"][-1] if r["credit"] else None for r in records],
            "credit_by_phase": credit_by_phase([r["credit"] for r in records]),
        }
    differences = {}
    for a, b in CONTRASTS:
        seeds = sorted(set(runs[a]) & set(runs[b]))
        if seeds:
            differences[f"{a} - {b}"] = rr.paired_diff([runs[a][s]["heldout"]["per_task_success"] for s in seeds],
                                                       [runs[b][s]["heldout"]["per_task_success"] for s in seeds])
    any_run = next((r for by_seed in runs.values() for r in by_seed.values()), None)
    n_tasks = len(any_run["heldout"]["per_task_success"]) if any_run else None
    episodes = config(args, 0, Path(args.runs)).eval.episodes_per_task
    all_jobs = jobs(args)
    return {
        "command": command(__file__, sys.argv[1:]),
        "setting": {"preset": PRESET, "overrides": SETTING + args.overrides + NORM,
                    "estimators": {k: v for k, v in ESTIMATORS.items()}},
        "norm_std": False, "heldout_tasks": n_tasks, "episodes_per_task": episodes,
        "estimators": estimators, "differences": differences,
        "grpo_is_gigpo_omega0": {"checked_seeds": checked, "identical": identical,
                                 "note": "norm_std=false: GRPO's advantage is GiGPO's episode term; grpo's other "
                                         "seeds are gigpo_omega0's runs when the checked ones agree bit for bit"},
        "power": rr.power_statement(n_tasks, episodes, len(args.seeds)) if n_tasks else None,
        "runs_done": f"{sum(j.key in table for j in all_jobs)} of {len(all_jobs)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS))
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, one thread each when > 1")
    parser.add_argument("--runs", default="runs/estimators_llm")
    parser.add_argument("--out", default=str(ROOT / "docs" / "estimators_llm.json"))
    parser.add_argument("--report-only", action="store_true", help="write --out from the finished runs")
    parser.add_argument("--warm-runs", help="the run root of rl_vs_baselines.py: use its warm starts (the same "
                                            "setting and seeds; run the two scripts one after the other)")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (after --), as for agentgym train")
    args = parser.parse_args()
    bad = [o for o in args.overrides if o.split("=", 1)[0].startswith("estimator.")]
    if bad:
        parser.error(f"{bad[0]}: the estimators' settings are this benchmark's (ESTIMATORS, norm_std=false)")
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key))
        return
    rr.check_settings(run_root, {"overrides": SETTING + args.overrides + NORM})
    out, failed = rr.schedule(args, jobs(args), report, __file__, run_root)
    for name, e in out["estimators"].items():
        print(f"{name:13s} finals {[round(x, 3) for x in e['finals']]} mean {e['mean']}")
    for name, d in out["differences"].items():
        print(f"{name:22s} {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] ({d['seeds']} seeds, {d['pairs']} pairs)")
    print(f"power: {out['power']}")
    print(f"{out['runs_done']} runs done; wrote {args.out}")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
