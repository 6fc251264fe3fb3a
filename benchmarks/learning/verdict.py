"""Does RL beat imitation at equal compute? The pre-registered experiment of docs/verdict.md.

Two settings, each a preset exactly as a user gets it: `tiny` (household-tiny, the main job, free
decoding) and `smol` (household-smol, SmolLM2-135M-Instruct with LoRA). Four arms per seed, all
from the seed's warm start (the preset's own SFT):

    gigpo   the preset's RL
    grpo    the same with estimator.name=grpo (the only change)
    rft     SFT on the policy's own successful episodes, GiGPO's rollout budget and optimizer steps
            (benchmarks/learning/rl_vs_baselines.py:run_rft)
    sft     SFT on fresh demonstrations of the preset's demonstrator, GiGPO's optimizer steps and
            trained tokens (benchmarks/learning/rl_vs_baselines.py:run_sft_arm)

Each arm's learning rate is the best of its grid (docs/verdict.md) by validation success on a
tuning seed (100) at the full budget; seeds 0-4 are then run with it. Evaluation: the final model
on the preset's held-out tasks and on heldout_unseen, the same episodes for every arm of a seed.

The primary comparison is gigpo against the better imitation arm (sft or rft, by mean held-out
success over seeds), the secondary gigpo against grpo; each is a per-seed paired difference with a
95% t-interval over seeds (the pooled task-level bootstrap beside it is evaluation noise only).

Every run is a resumable job (benchmarks/harness/jobs.py) under --runs; docs/verdict.json is
rewritten as each lands, holding every finished job's result (per-task outcomes included). Those
records seed the done-table of a new --runs folder, so a machine that loses its runs loses only
the unfinished ones (a warm start whose model is gone is rebuilt: SFT from the seed is repeatable).

    python benchmarks/learning/verdict.py --setting tiny --parallel 2      # every job not done yet
    python benchmarks/learning/verdict.py --report                          # the tables, from docs/verdict.json
    python benchmarks/learning/verdict.py --setting tiny --seeds 0 --tune-seed 9 --runs /tmp/v --out /tmp/v.json \\
        --grid gigpo=1e-4 grpo=1e-4 rft=1e-4 sft=1e-3 -- iterations=1 sft.num_tasks=8 ...  # a smoke test

Config overrides (for every job) come last, after `--`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.harness.provenance import ROOT, code_version, command, process_cpu_seconds  # noqa: E402
from benchmarks.learning.rl_vs_baselines import (NoSuccessfulRollouts, demonstrator_ceiling, run_rft_arm,  # noqa: E402
                                        run_sft_arm, validation_file)

ARMS = ("gigpo", "grpo", "rft", "sft")
RL_ARMS = ("gigpo", "grpo")
IMITATION_ARMS = ("rft", "sft")
SEEDS = (0, 1, 2, 3, 4)
TUNE_SEED = 100
# every job: checkpoints every 5 iterations, evaluations before and after only, no safety stop (a
# run is defined by its iterations), one thread, nothing the figures do not need
COMMON = ["checkpoint_every=5", "eval.every=0", "time_budget_s=null", "log.save_trajectories_every=0",
          "log.plot=false", "log.tensorboard=false", "torch_threads=1"]


@dataclass(frozen=True)
class Setting:
    preset: str
    grids: dict  # arm -> learning rates, named in docs/verdict.md before any run
    ceiling: bool  # measure the demonstrator's own held-out success (an imperfect demonstrator)
    overrides: tuple[str, ...] = ()  # every job's, after COMMON (docs/verdict.md's amendments say why)


SETTINGS = {
    "tiny": Setting("household-tiny", {"gigpo": (3e-5, 1e-4, 3e-4), "grpo": (3e-5, 1e-4, 3e-4),
                                       "rft": (3e-5, 1e-4, 3e-4), "sft": (3e-4, 1e-3, 3e-3)}, ceiling=True),
    "smol": Setting("household-smol", {"gigpo": (3e-5, 1e-4, 3e-4), "grpo": (3e-5, 1e-4, 3e-4),
                                       "rft": (1e-4, 3e-4, 1e-3), "sft": (1e-4, 3e-4, 1e-3)}, ceiling=False,
                    # the fastest engine when its runs started: the same decoding (docs/engine_speed.md)
                    overrides=("policy.engine=pool",)),
}


def grid(args, arm: str) -> tuple[float, ...]:
    return args.grids[arm]


def job_overrides(args) -> list[str]:
    """Every job's overrides: COMMON, the setting's own, then the user's (after `--`)."""
    return [*COMMON, *SETTINGS[args.setting].overrides, *args.overrides]


def config(args, seed: int, folder: Path, *extra: str):
    from agentgym.trainers.config import load_config

    return load_config(args.preset, [*job_overrides(args), f"seed={seed}", f"run_dir={folder}", *extra])


# --- the jobs -------------------------------------------------------------------------------------
def jobs(args) -> list[rr.Job]:
    """Every run with what it waits for, in the order the scheduler starts them: the tuning runs
    first (every final run waits for its arm's choice), then seed by seed."""
    tuned = {arm: len(grid(args, arm)) > 1 for arm in args.arms}
    out = [rr.Job("ceiling")] if args.ceiling else []
    warm_seeds = [*([args.tune_seed] if any(tuned.values()) else []), *args.seeds]
    out += [rr.Job(f"warm/seed{s}") for s in warm_seeds]
    warm_tune = (f"warm/seed{args.tune_seed}",)
    gigpo_tunes = tuple(rr.tune_key("gigpo", lr) for lr in grid(args, "gigpo")) if any(tuned.values()) else ()
    for arm in args.arms:
        if not tuned[arm]:
            continue
        # the imitation arms' tuning runs match the compute of the chosen GiGPO rate's tuning run
        after = warm_tune + (gigpo_tunes if arm in IMITATION_ARMS else ())
        out += [rr.Job(rr.tune_key(arm, lr), after) for lr in grid(args, arm)]
    for seed in args.seeds:
        for arm in args.arms:
            after = (f"warm/seed{seed}",) + (tuple(rr.tune_key(arm, lr) for lr in grid(args, arm)) if tuned[arm] else ())
            if arm in IMITATION_ARMS:
                after += (f"gigpo/seed{seed}",)
            out.append(rr.Job(f"{arm}/seed{seed}", after))
    return out


def chosen_lr(table: rr.DoneTable, args, arm: str) -> float:
    """The arm's rate: the only one given, or the best validation success of its tuning runs."""
    return rr.best_rate(table, arm, grid(args, arm))


def run_job(args, key: str) -> dict:
    """One job, in this process; returns what the done-table records of it, with the code version
    that ran it (a table resumed on a later commit says which jobs ran on which)."""
    return {**run_one(args, key), "code_version": code_version()}


def run_one(args, key: str) -> dict:
    table = rr.DoneTable(Path(args.runs) / "done.json")  # read only: the scheduler writes it
    folder = rr.job_dir(Path(args.runs), key)
    log = print
    if key == "ceiling":
        return demonstrator_ceiling(config(args, args.seeds[0], folder), folder)
    if key.startswith("warm/"):
        return rr.run_warm(config(args, rr.arm_and_seed(key)[1], folder), folder, log)
    job = rr.arm_job(key, args.tune_seed, lambda arm: chosen_lr(table, args, arm), "gigpo", RL_ARMS)
    arm, seed, lr = job.arm, job.seed, job.lr
    extra = ["estimator.name=grpo"] if arm == "grpo" else []
    cfg = config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]), f"ppo.lr={lr}", *extra)
    rr.use_threads(cfg)
    evals = rr.arm_evals(cfg, job, folder, lambda: validation_file(args, cfg, folder))
    if arm in RL_ARMS:
        result = rr.run_rl(cfg, folder, evals, log)
        return {"arm": arm, "seed": seed, **result, "cpu_seconds": process_cpu_seconds()}
    budget = rr.matched_budget(table, job, "GiGPO")
    if arm == "rft":  # its samples are the policy's own steps, as GiGPO's: GiGPO's samples per step
        batch_size = max(1, round(budget["samples"] / budget["optimizer_steps"]))
        stats = run_rft_arm(cfg, folder, budget["steps_per_iteration"], batch_size, lr, seed, log,
                            micro_batch_size=cfg.ppo.micro_batch_size)
    else:  # the preset's demonstrator, filtered as the preset's warm start is
        kind_of_sft = "sft_filtered" if cfg.sft.filter_success else "sft_unfiltered"
        stats = run_sft_arm(cfg, folder, kind_of_sft, budget, lr, seed, log,
                            micro_batch_size=cfg.ppo.micro_batch_size)
        batch_size = stats["batch_size"]
    results = rr.evaluate_trained(cfg, folder, job, evals)
    return {"arm": arm, "seed": seed, "lr": lr, "matched_to": job.matched_to, "batch_size": batch_size,
            "compute": {"optimizer_steps": stats["steps"], "tokens": stats["tokens"],
                        "rollout_episodes": stats.get("episodes", 0),
                        "gigpo_optimizer_steps": budget["optimizer_steps"], "gigpo_tokens": budget["tokens"]},
            "train": stats, **results, "cpu_seconds": process_cpu_seconds()}


# --- the figures ----------------------------------------------------------------------------------
def compare(finals: dict, a: str, b: str) -> dict | None:
    """a - b on the held-out set, paired per task within each seed both arms have: the mean, the
    95% t-interval over seeds (`seed_ci`, the primary interval) and the pooled task bootstrap
    (`ci`: evaluation noise only)."""
    by_seed = {arm: {r["seed"]: r for r in finals[arm]} for arm in (a, b)}
    seeds = sorted(set(by_seed[a]) & set(by_seed[b]))
    if not seeds:
        return None
    out = rr.paired_diff([by_seed[a][s]["heldout"]["per_task_success"] for s in seeds],
                         [by_seed[b][s]["heldout"]["per_task_success"] for s in seeds])
    return {"a": a, "b": b, "seeds": seeds, "mean": out["diff"], "per_seed": out["per_seed"],
            "seed_ci": out["seed_ci"], "pooled_ci_evaluation_noise_only": out["ci"], "pairs": out["pairs"]}


def verdict_sentence(primary: dict | None, seeds_planned: int, mdd: float | None) -> str:
    if primary is None or primary["seed_ci"] is None:
        return "not yet: fewer than two seeds of both arms have finished"
    low, high = primary["seed_ci"]
    partial = "" if len(primary["seeds"]) == seeds_planned else \
        f" (provisional: {len(primary['seeds'])} of {seeds_planned} seeds)"
    if low > 0:
        return f"RL beats imitation at equal compute{partial}"
    if high < 0:
        return f"imitation beats RL at equal compute{partial}"
    detectable = f"; five seeds detect about {mdd:.3f} in success" if mdd is not None else ""
    return f"no difference detected{partial}{detectable}"


def with_training_cpu(key: str, record: dict, run_root: Path) -> dict:
    """An RL job's record with `training_cpu_seconds`: its iterations' CPU alone (the trainer's
    time/iteration_cpu_s, the last log of each iteration, summed), complete even for a resumed job,
    whose `cpu_seconds` counts only the process that finished it. Read from the job's metrics.jsonl
    where this machine has it; a job restored from the committed file keeps the figure it has."""
    folder = rr.job_dir(run_root, key)
    if record.get("arm") not in RL_ARMS or not (folder / "metrics.jsonl").is_file():
        return record
    from benchmarks.learning.real_llm_rl import iteration_cpu_seconds

    per_iteration = iteration_cpu_seconds(folder)
    return {**record, "training_cpu_seconds": round(sum(per_iteration), 1), "iterations_timed": len(per_iteration)}


def report(args, table: rr.DoneTable) -> dict:
    import numpy as np

    records = {key: with_training_cpu(key, table[key], Path(args.runs)) for key in table.done}
    finals = {arm: [records[f"{arm}/seed{s}"] for s in args.seeds if f"{arm}/seed{s}" in records] for arm in ARMS}
    warm = {r["seed"]: r["heldout_before"] for r in finals["gigpo"]}
    arms = {}
    for arm, arm_records in finals.items():
        arms[arm] = {
            "lr": arm_records[0]["lr"] if arm_records else None,
            "seeds": [{"seed": r["seed"], "before": warm[r["seed"]]["success_rate"] if r["seed"] in warm else None,
                       "after": r["heldout"]["success_rate"], "after_unseen": r["heldout_unseen"]["success_rate"],
                       "invalid_action_rate": r["heldout"].get("invalid_action_rate"),
                       "mean_steps": r["heldout"].get("mean_steps"),
                       "compute": compute_of(r), "cpu_seconds": r.get("cpu_seconds"),
                       "training_cpu_seconds": r.get("training_cpu_seconds")} for r in arm_records],
            "mean_after": float(np.mean([r["heldout"]["success_rate"] for r in arm_records])) if arm_records else None,
            "mean_before": float(np.mean([warm[r["seed"]]["success_rate"] for r in arm_records if r["seed"] in warm]))
            if any(r["seed"] in warm for r in arm_records) else None,
        }
    scored = [a for a in IMITATION_ARMS if arms[a]["mean_after"] is not None]
    best = max(scored, key=lambda a: arms[a]["mean_after"]) if scored else None
    primary = compare(finals, "gigpo", best) if best else None
    for arm in ARMS:  # every arm against the primary baseline (the baseline's own row: zero)
        arms[arm]["minus_best_imitation"] = compare(finals, arm, best) if best and finals[arm] else None
    secondary = compare(finals, "gigpo", "grpo")
    gains = {arm: compare({arm: finals[arm], "warm": [{"seed": s, "heldout": w} for s, w in warm.items()]},
                          arm, "warm") for arm in ARMS}
    any_final = next((r for rs in finals.values() for r in rs), None)
    n_tasks = len(any_final["heldout"]["per_task_success"]) if any_final else None
    episodes = config(args, 0, Path(args.runs)).eval.episodes_per_task
    mdd = None
    if n_tasks:
        from agentgym.evaluation.stats import min_detectable_difference
        mdd = min_detectable_difference(n_tasks * len(args.seeds), episodes)
    lr_choice = {arm: {f"{lr:g}": table[rr.tune_key(arm, lr)]["validation"]["success_rate"]
                       for lr in grid(args, arm) if rr.tune_key(arm, lr) in table} for arm in ARMS}
    all_jobs = jobs(args)
    return {
        "protocol": "docs/verdict.md",
        "command": command(__file__, ["--setting", args.setting, "--runs", "RUNS"]
                           + (["--", *args.overrides] if args.overrides else [])),
        "rerun_one_job": command(__file__, ["--setting", args.setting, "--runs", "RUNS", "--job", "KEY"])
                         + " (its dependencies done in RUNS, or restored from this file's jobs)",
        "code_version": ", ".join(sorted({r.get("code_version") or read_code_version(Path(args.runs))
                                          for r in table.done.values()} or {code_version()})),
        "preset": args.preset, "overrides": job_overrides(args), "seeds": list(args.seeds),
        "heldout_tasks": n_tasks, "episodes_per_task": episodes,
        "demonstrator_ceiling": table["ceiling"] if "ceiling" in table else None,
        "arms": arms,
        "gain_over_warm_start": gains,
        "primary": {"comparison": f"gigpo - best imitation arm ({best})" if best else "gigpo - best imitation arm",
                    **(primary or {})},
        "secondary": {"comparison": "gigpo - grpo", **(secondary or {})},
        "verdict": verdict_sentence(primary, len(args.seeds), mdd),
        "lr_choice": {"validation": f"{args.val_tasks} fresh tasks (generator seed {rr.VALIDATION_SEED}, tuning seed "
                                    f"{args.tune_seed}'s training pool removed)", "grids": lr_choice,
                      "chosen": {arm: chosen_lr(table, args, arm) for arm in ARMS
                                 if all(rr.tune_key(arm, lr) in table for lr in grid(args, arm))
                                 or len(grid(args, arm)) == 1}},
        "runs_done": f"{sum(j.key in table for j in all_jobs)} of {len(all_jobs)}",
        # every finished job's record, per-task outcomes included: the done-table of a new --runs folder
        # (paths inside the runs folder written as RUNS/..., so no machine's folder is committed)
        "jobs": {j.key: portable({"code_version": read_code_version(Path(args.runs)), **records[j.key]}, Path(args.runs))
                 for j in all_jobs if j.key in records},
    }


def portable(record: dict, run_root: Path) -> dict:
    """`record` with the runs folder's path written as RUNS (local() reverses it)."""
    text = json.dumps(record)
    for root in sorted({str(run_root.resolve()), str(run_root)}, key=len, reverse=True):
        text = text.replace(json.dumps(root)[1:-1], "RUNS")
    return json.loads(text)


def local(record: dict, run_root: Path) -> dict:
    """A committed record's RUNS/... paths in this machine's runs folder."""
    return json.loads(json.dumps(record).replace('"RUNS/', json.dumps(str(run_root.resolve()) + "/")[:-1]))


def compute_of(record: dict) -> dict:
    c = record["compute"]
    return {k: c.get(k) for k in ("optimizer_steps", "tokens", "samples", "rollout_episodes") if k in c}


def read_code_version(run_root: Path) -> str:
    """The code version the scheduler of `run_root` started with (jobs that did not record their own)."""
    path = run_root / "code_version"
    return path.read_text().strip() if path.is_file() else "unknown"


def restore(args, run_root: Path) -> None:
    """Seed this --runs folder's done-table from the jobs already recorded in --out, except warm
    starts whose model is not on this machine (rebuilt when a job that needs one is pending)."""
    out = Path(args.out)
    if not out.is_file():
        return
    recorded = json.loads(out.read_text()).get(args.setting, {}).get("jobs", {})
    table = rr.DoneTable(run_root / "done.json")
    pending_needs_warm = {j.after[0] for j in jobs(args) if j.key not in recorded and j.after[:1]
                          and j.after[0].startswith("warm/")}
    for key, result in recorded.items():
        if key in table:
            continue
        result = local(result, run_root)
        if key.startswith("warm/") and key in pending_needs_warm and not Path(result["model"]).exists():
            continue
        table.mark(key, result)


def print_tables(path: Path) -> None:
    """The README's tables, from the committed results."""
    whole = json.loads(path.read_text())
    for setting in SETTINGS:
        r = whole.get(setting)
        if not r:
            continue
        print(f"\n{setting} ({r['preset']}, {r['runs_done']} runs done, code {r['code_version']})\n")
        print("| arm | lr | before | after | gain over warm start [95% CI over seeds] | seeds |")
        print("| --- | --- | --- | --- | --- | --- |")
        for arm, a in r["arms"].items():
            if not a["seeds"]:
                print(f"| {arm} | | | | | 0 |")
                continue
            before = [s["before"] for s in a["seeds"] if s["before"] is not None]
            g = r["gain_over_warm_start"].get(arm) or {}
            ci = g.get("seed_ci")
            gain = f"{g['mean']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else (f"{g['mean']:+.3f}" if g else "")
            print(f"| {arm} | {a['lr']:g} | {sum(before) / max(len(before), 1):.3f} | {a['mean_after']:.3f} | "
                  f"{gain} | {len(a['seeds'])} |")
        for name in ("primary", "secondary"):
            c = r[name]
            if "mean" in c:
                ci = c["seed_ci"]
                ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "(one seed: no interval)"
                print(f"\n{name}: {c['comparison']} = {c['mean']:+.3f} {ci_text} over seeds {c['seeds']}")
        print(f"\nverdict: {r['verdict']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--tune-seed", type=int, default=TUNE_SEED)
    parser.add_argument("--grid", nargs="+", metavar="ARM=LR[,LR]", default=[],
                        help="replace an arm's grid (smoke tests; the experiment uses docs/verdict.md's)")
    parser.add_argument("--val-tasks", type=int, default=100, help="validation tasks for the learning rates")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, one thread each")
    parser.add_argument("--runs", help="the jobs' folder (default runs/verdict_<setting>)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "verdict.json"))
    parser.add_argument("--report", action="store_true", help="print the tables of --out and exit")
    parser.add_argument("--report-only", action="store_true", help="rewrite --out from the finished runs")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: one run, in its own process
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for every job, as for agentgym train")
    args = parser.parse_args()
    if args.report:
        print_tables(Path(args.out))
        return
    setting = SETTINGS[args.setting]
    args.preset, args.ceiling = setting.preset, setting.ceiling
    args.grids = dict(setting.grids)
    for item in args.grid:
        arm, _, rates = item.partition("=")
        if arm not in ARMS or not rates:
            parser.error(f"--grid {item!r}: write ARM=LR[,LR...] with ARM one of {', '.join(ARMS)}")
        args.grids[arm] = tuple(float(x) for x in rates.split(","))
    if args.tune_seed in args.seeds:
        parser.error(f"--tune-seed {args.tune_seed} is one of --seeds: the rates must be chosen on another seed")
    if "gigpo" not in args.arms:
        parser.error("the imitation arms match the compute of the gigpo arm: keep gigpo in --arms")
    args.runs = args.runs or f"runs/verdict_{args.setting}"
    run_root = Path(args.runs)
    if args.job:
        # each job records the overrides it ran with: jobs of one table may run on different machines
        rr.run_worker(run_root, args.job, lambda key: {**run_job(args, key), "overrides": job_overrides(args)},
                      (NoSuccessfulRollouts,))
        return
    rr.check_settings(run_root, {"setting": args.setting, "overrides": job_overrides(args),
                                 "tune_seed": args.tune_seed, "grids": args.grids, "val_tasks": args.val_tasks})
    if not (run_root / "code_version").is_file():
        (run_root / "code_version").write_text(code_version() + "\n")
    restore(args, run_root)
    out, failed = rr.schedule(args, jobs(args), report, __file__, run_root,
                              write=lambda path, data: rr.write_results_key(path, args.setting, data))
    for arm, a in out["arms"].items():
        print(f"{arm:6s} lr {a['lr']} after {[round(s['after'], 3) for s in a['seeds']]}")
    print(f"verdict: {out['verdict']}; {out['runs_done']} runs done; wrote {args.out}")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
