"""Tree (branch-measured step values) against GiGPO and GRPO on household-tiny, at equal env steps.

The protocol, fixed before any run, is docs/tree_protocol.md with its amendment of 2026-11-29:
arms gigpo, grpo and tree; seeds 0-4; every arm of a seed from the same warm start; the GiGPO arm
runs the preset's iterations and its env steps (branch episodes count for the tree arm) are the
budget of the other two, whose iteration counts come from a pilot's steps per iteration (seed 100,
three iterations per arm, never reported); the final held-out evaluation of each run; per arm the
mean over seeds with its t interval, and the paired differences tree - gigpo (primary) and
tree - grpo with their t intervals over seeds.

The verdict experiment (benchmarks/learning/verdict.py, `tiny` setting) already runs this
protocol's warm starts and GiGPO arm, so they are read from it, never run twice:

    warm/seedN     the verdict's warm start (its jobs folder, --verdict-runs); when its model is not
                   on this machine, rebuilt here by the verdict's own warm job
    gigpo/seedN    the verdict's run, when the verdict chose the preset's rate (ppo.lr)
    grpo/seedN     the verdict's run when it chose the preset's rate for GRPO; otherwise run here
                   at the preset's rate; while its tuning is undecided, pending
    tree/seedN     run here: the verdict's config, the seed's warm model (SFT off), the tree overrides
    pilot/ARM      run here, on the verdict's seed-100 warm start; pilot/gigpo is the verdict's GiGPO
                   tuning run stopped after three iterations, and is checked against it

Every run here is a resumable job (benchmarks/harness/jobs.py) under --runs; the verdict's
folder and results are only read. --out is rewritten as each job lands: the pilot and the
iteration counts it sets, per arm and seed the final held-out success and its source (a run
here, or a job of docs/verdict.json), env steps and trained tokens, the comparisons, what is
pending, and every job run here with its per-task outcomes (which seed the done-table of a new
--runs folder).

    python benchmarks/learning/tree_vs_baselines.py --pilot --verdict-runs runs/verdict_tiny
    python benchmarks/learning/tree_vs_baselines.py --verdict-runs runs/verdict_tiny --parallel 2
    python benchmarks/learning/tree_vs_baselines.py --report-only                 # rewrite --out

Config overrides (for every job; they must be the verdict's own) come last, after `--`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.harness.provenance import code_version, command, process_cpu_seconds  # noqa: E402
from benchmarks.learning import verdict  # noqa: E402
from benchmarks.learning.verdict_runs import (add_arguments, adopt_warm_starts, check_verdict_settings,  # noqa: E402
                                              difference, portable, verdict_results)

SETTING = "tiny"  # the verdict's setting this protocol shares: household-tiny
ARMS = {  # overrides of the verdict's config (the preset's) per arm
    "gigpo": [],
    "grpo": ["estimator.name=grpo"],
    # branch points every 3rd step, 2 branches each: about 6x the env steps of a root episode
    "tree": ["estimator.name=tree", "estimator.options.k=2", "estimator.options.every=3"],
}
BASELINES = ("gigpo", "grpo")
SEEDS = (0, 1, 2, 3, 4)
PILOT_SEED, PILOT_ITERATIONS = verdict.TUNE_SEED, 3
# the pilot reads env steps and tokens, never success: the trainer's evaluations cut to one episode,
# as the verdict's tuning runs cut theirs (so pilot/gigpo is the verdict's GiGPO tuning run, shortened)
PILOT_EVAL = ["eval.num_tasks=1", "eval.episodes_per_task=1"]
BUDGET_TOLERANCE = 0.10  # a run whose env steps or tokens differ from its seed's GiGPO run by more is flagged


# --- the verdict's rates -------------------------------------------------------------------------
def preset_lr(args) -> float:
    return verdict.config(args, 0, Path(args.runs)).ppo.lr


def verdict_rate(whole: dict, records: dict, arm: str, args) -> float | None:
    """The verdict's rate for `arm`: docs/verdict.json's choice, else (its tuning finished in its
    jobs folder, not yet in the file) the verdict's own rule on its tuning runs; None while undecided."""
    chosen = whole.get("lr_choice", {}).get("chosen", {})
    if arm in chosen:
        return float(chosen[arm])
    if all(rr.tune_key(arm, lr) in records for lr in args.grids[arm]):
        return verdict.chosen_lr(records, args, arm)
    return None


def baseline_sources(args, whole: dict, records: dict) -> dict:
    """Per baseline arm: its rate in the verdict, and where its runs come from: "verdict" (the
    verdict ran it at the preset's rate), "here" (at another rate: this runner runs the arm at the
    preset's), or None (the verdict's tuning has not chosen yet)."""
    lr = preset_lr(args)
    out = {}
    for arm in BASELINES:
        rate = verdict_rate(whole, records, arm, args)
        source = None if rate is None else "verdict" if rate == lr else "here"
        out[arm] = {"verdict_lr": rate, "preset_lr": lr, "source": source}
    return out


def own_arms(sources: dict) -> list[str]:
    """The arms run here: tree, and each baseline the verdict ran at another rate than the preset's."""
    return ["tree"] + [arm for arm in BASELINES if sources[arm]["source"] == "here"]


# --- the jobs -------------------------------------------------------------------------------------
def jobs(args, own: list[str]) -> list[rr.Job]:
    """The pilot (on seed 100's warm start), then per seed its warm start and the arms run here,
    each waiting for the whole pilot (which sets its iterations)."""
    pilot_warm = f"warm/seed{PILOT_SEED}"
    out = [rr.Job(pilot_warm)] + [rr.Job(f"pilot/{arm}", (pilot_warm,)) for arm in ARMS]
    if args.pilot:
        return out
    pilot = tuple(f"pilot/{arm}" for arm in ARMS)
    for seed in args.seeds:
        out.append(rr.Job(f"warm/seed{seed}"))
        out += [rr.Job(f"{arm}/seed{seed}", (f"warm/seed{seed}", *pilot)) for arm in own]
    return out


def run_job(args, key: str) -> dict:
    """One job, in this process: a warm start (the verdict's own job), a pilot run or an arm's run."""
    if key.startswith("warm/"):
        return {**verdict.run_one(args, key), "code_version": code_version()}
    table = rr.DoneTable(Path(args.runs) / "done.json")  # read only: the scheduler writes it
    folder = rr.job_dir(Path(args.runs), key)
    if key.startswith("pilot/"):
        arm, seed, extra = key.split("/")[1], PILOT_SEED, [f"iterations={PILOT_ITERATIONS}", *PILOT_EVAL]
    else:
        arm, seed = rr.arm_and_seed(key)
        extra = [f"iterations={planned_iterations(args, pilot_records(table))[arm]}"]
    cfg = verdict.config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]), *ARMS[arm], *extra)
    rr.use_threads(cfg)
    evals = {} if key.startswith("pilot/") else {"heldout_unseen": rr.split_file(cfg, "heldout_unseen", folder)}
    result = {"arm": arm, "seed": seed, **rr.run_rl(cfg, folder, evals), "env_steps": env_steps(folder),
              "cpu_seconds": process_cpu_seconds(), "code_version": code_version()}
    if key == "pilot/gigpo":
        tuning_run = rr.tune_key("gigpo", cfg.ppo.lr)
        result["verdict_tuning_run"] = same_iterations(folder, Path(args.verdict_runs), tuning_run)
    return result


# --- the pilot ------------------------------------------------------------------------------------
def iteration_rows(run_dir: Path) -> dict[int, dict]:
    """metrics.jsonl's row of each RL iteration (a resumed run logged the iterations after its
    checkpoint again: the last one counts)."""
    from agentgym.trainers.logging_utils import read_metrics

    return {int(r["iteration"]): r for r in read_metrics(run_dir) if "rollout/episodes" in r}


def env_steps(run_dir: Path) -> int:
    """The env steps of a run: every step of every episode it played, branch episodes included."""
    return int(round(sum(r["rollout/episodes"] * r["rollout/mean_steps"] for r in iteration_rows(run_dir).values())))


def same_iterations(run_dir: Path, verdict_runs: Path, key: str) -> dict:
    """Do `run_dir`'s iterations equal the first ones of the verdict's job `key` (the same config, run
    by the verdict's code version)? Every metric both logged, time/ excepted, compared exactly."""
    reference = verdict_runs / key
    if not (reference / "metrics.jsonl").is_file():
        return {"reference": key, "compared": 0, "note": "the verdict's run is not on this machine"}
    ours, theirs = iteration_rows(run_dir), iteration_rows(reference)
    compared, differ = 0, []
    for i in sorted(ours):
        keys = sorted(k for k in set(ours[i]) & set(theirs.get(i, {})) if not k.startswith("time") and k != "step")
        compared += len(keys)
        differ += [f"iteration {i} {k}: {ours[i][k]} here, {theirs[i][k]} there"
                   for k in keys if ours[i][k] != theirs[i][k]]
    return {"reference": key, "iterations": sorted(ours), "compared": compared, "equal": compared > 0 and not differ,
            "differences": differ[:10]}


def pilot_records(table) -> dict[str, dict]:
    return {arm: table[f"pilot/{arm}"] for arm in ARMS if f"pilot/{arm}" in table}


def pilot_figures(pilot: dict[str, dict]) -> dict:
    """Per arm, per iteration: env steps, trained tokens, and its process's CPU seconds (start included)."""
    return {arm: {"steps_per_iteration": r["env_steps"] / r["iterations"],
                  "tokens_per_iteration": r["compute"]["tokens"] / r["iterations"],
                  "process_cpu_seconds_per_iteration": r["cpu_seconds"] / r["iterations"]} for arm, r in pilot.items()}


def planned_iterations(args, pilot: dict[str, dict]) -> dict[str, int]:
    """Each arm's iterations: the preset's, times GiGPO's env steps per iteration over the arm's."""
    if set(pilot) != set(ARMS):
        raise SystemExit(f"the pilot has not finished (done: {', '.join(sorted(pilot)) or 'none'}): run with --pilot")
    base = verdict.config(args, 0, Path(args.runs)).iterations
    steps = {arm: f["steps_per_iteration"] for arm, f in pilot_figures(pilot).items()}
    return {arm: max(1, round(base * steps["gigpo"] / steps[arm])) for arm in ARMS}


# --- the figures ----------------------------------------------------------------------------------
def run_row(record: dict, source: str, steps: int | None) -> dict:
    return {"source": source, "lr": record.get("lr"), "iterations": record.get("iterations"),
            "before": record["heldout_before"]["success_rate"], "after": record["heldout"]["success_rate"],
            "after_unseen": (record.get("heldout_unseen") or {}).get("success_rate"), "env_steps": steps,
            "trained_tokens": record["compute"]["tokens"], "cpu_seconds": record.get("cpu_seconds")}


def collect_runs(args, table, sources: dict, records: dict, previous: dict) -> tuple[dict, dict, list[str]]:
    """Per arm and seed: the finished run's record (here or the verdict's), its row, and what is pending.
    A verdict run's env steps come from its metrics.jsonl when on this machine, else from --out's last rows."""
    lr = preset_lr(args)
    found, rows, pending = {arm: {} for arm in ARMS}, {arm: {} for arm in ARMS}, []
    for arm in ARMS:
        source = "here" if arm == "tree" else sources[arm]["source"]
        for seed in args.seeds:
            key = f"{arm}/seed{seed}"
            if source is None:
                pending.append(f"{key}: waits for the verdict's choice of the {arm} rate")
            elif source == "here" and key in table:
                found[arm][seed] = table[key]
                rows[arm][seed] = run_row(table[key], "this runner", table[key].get("env_steps"))
            elif source == "here":
                pending.append(f"{key}: not run yet")
            elif key not in records:
                pending.append(f"{key}: the verdict's run has not finished")
            elif records[key]["lr"] != lr:
                pending.append(f"{key}: the verdict's run has rate {records[key]['lr']}, not the preset's {lr}")
            else:
                metrics = Path(args.verdict_runs) / key
                steps = env_steps(metrics) if (metrics / "metrics.jsonl").is_file() else \
                    previous.get(arm, {}).get(str(seed), {}).get("env_steps")
                found[arm][seed] = records[key]
                rows[arm][seed] = run_row(records[key], f"docs/verdict.json {SETTING}.jobs {key}", steps)
    return found, rows, pending


def budget_check(rows: dict) -> list[dict]:
    """Each run's env steps and trained tokens against its seed's GiGPO run (protocol: flagged above 10%)."""
    out = []
    for arm in ("tree", "grpo"):
        for seed, row in sorted(rows[arm].items()):
            base = rows["gigpo"].get(seed)
            if base is None:
                continue
            entry = {"run": f"{arm}/seed{seed}"}
            for what in ("env_steps", "trained_tokens"):
                if row[what] is not None and base[what]:
                    entry[f"{what}_vs_gigpo"] = row[what] / base[what] - 1
            entry["over_tolerance"] = any(abs(v) > BUDGET_TOLERANCE
                                          for k, v in entry.items() if k.endswith("_vs_gigpo"))
            out.append(entry)
    return out


def report(args, table) -> dict:
    import statistics

    whole, records = verdict_results(args)
    sources = baseline_sources(args, whole, records)
    previous = json.loads(Path(args.out).read_text()).get("runs", {}) if Path(args.out).is_file() else {}
    found, rows, pending = collect_runs(args, table, sources, records, previous)
    pilot = pilot_records(table)
    arms = {}
    for arm in ARMS:
        finals = [found[arm][s]["heldout"]["success_rate"] for s in sorted(found[arm])]
        arms[arm] = {"seeds": sorted(found[arm]), "mean": statistics.fmean(finals) if finals else None,
                     "interval_over_seeds": rr.seed_interval(finals),
                     "source": "this runner" if arm == "tree" else sources[arm]["source"]}
    own = [key for key in table.done if not key.startswith("warm/") or table[key].get("source") is None]
    return {
        "protocol": "docs/tree_protocol.md (amendment of 2026-11-29)",
        "command": command(__file__, [*(["--pilot"] if args.pilot else []),
                                      *(["--seeds", *map(str, args.seeds)] if list(args.seeds) != list(SEEDS) else []),
                                      "--verdict-runs", "VERDICT_RUNS", "--runs", "RUNS",
                                      *(["--", *args.overrides] if args.overrides else [])]),
        "code_version": ", ".join(sorted({table[k].get("code_version", "unknown") for k in own} or {code_version()})),
        "verdict": {"results": "docs/verdict.json", "setting": SETTING, "code_version": whole.get("code_version"),
                    "baselines": sources},
        "preset": args.preset, "overrides": verdict.job_overrides(args), "arms_overrides": ARMS,
        "seeds": list(args.seeds),
        "pilot": {"seed": PILOT_SEED, "iterations": PILOT_ITERATIONS, "overrides": PILOT_EVAL,
                  "arms": pilot_figures(pilot),
                  "planned_iterations": planned_iterations(args, pilot) if set(pilot) == set(ARMS) else None,
                  "gigpo_equals_verdict_tuning_run": pilot.get("gigpo", {}).get("verdict_tuning_run")},
        "runs": {arm: {str(s): row for s, row in sorted(by_seed.items())} for arm, by_seed in rows.items()},
        "arms": arms,
        "primary": {"comparison": "tree - gigpo", **(difference(found, "tree", "gigpo", len(args.seeds)) or {})},
        "secondary": {"comparison": "tree - grpo", **(difference(found, "tree", "grpo", len(args.seeds)) or {})},
        "budget": budget_check(rows),
        "pending": pending,
        # the jobs run here, per-task outcomes included: they seed the done-table of a new --runs folder
        # (paths written as RUNS/... and VERDICT_RUNS/...: no machine's folder is committed)
        "jobs": {k: portable(table[k], args) for k in own},
    }


def restore(args, run_root: Path) -> None:
    """Seed this --runs folder's done-table from the jobs recorded in --out (warm starts excepted:
    they are the verdict's, found again on this machine, or rebuilt)."""
    out = Path(args.out)
    if not out.is_file():
        return
    table = rr.DoneTable(run_root / "done.json")
    for key, record in json.loads(out.read_text()).get("jobs", {}).items():
        if key not in table and not key.startswith("warm/"):
            table.mark(key, verdict.local(record, run_root))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--pilot", action="store_true", help="only the pilot: each arm's env steps per iteration")
    add_arguments(parser, SETTING, "tree_vs_baselines")
    args = parser.parse_args()
    if PILOT_SEED in args.seeds:
        parser.error(f"--seeds: seed {PILOT_SEED} is the pilot's, never a reported seed")
    setting = verdict.SETTINGS[SETTING]
    args.setting, args.preset, args.grids = SETTING, setting.preset, dict(setting.grids)
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key))
        return
    whole, records = verdict_results(args)
    check_verdict_settings(args, whole)
    if not args.report_only:
        rr.check_settings(run_root, {"overrides": verdict.job_overrides(args), "arms": ARMS})
    restore(args, run_root)
    all_jobs = jobs(args, own_arms(baseline_sources(args, whole, records)))
    if not args.report_only:
        adopt_warm_starts(args, rr.DoneTable(run_root / "done.json"), records, all_jobs)
    out, failed = rr.schedule(args, all_jobs, report, __file__, run_root)
    for arm, a in out["arms"].items():
        print(f"{arm:6s} ({a['source']}) after {[round(out['runs'][arm][str(s)]['after'], 3) for s in a['seeds']]}")
    if out["pilot"]["planned_iterations"]:
        steps = {arm: round(f["steps_per_iteration"]) for arm, f in out["pilot"]["arms"].items()}
        print(f"pilot: steps per iteration {steps}, iterations {out['pilot']['planned_iterations']}")
    for name in ("primary", "secondary"):
        if "mean" in out[name]:
            print(f"{name}: {out[name]['comparison']} {out[name]['mean']:+.3f} {out[name]['interval_over_seeds']}: "
                  f"{out[name]['result']}")
    print(f"{len(out['pending'])} runs pending; wrote {args.out}")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
