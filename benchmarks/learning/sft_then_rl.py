"""SFT then GiGPO against SFT alone at equal compute, on household-tiny: docs/sft_then_rl_protocol.md.

The protocol, fixed before any run: per seed (0-4), from the verdict's warm start, SFT on fresh
demonstrations exactly as the verdict's `sft` arm (same data, batch-size rule and data order) for
half of the seed's GiGPO optimizer steps, then the preset's GiGPO for half its iterations; against
the verdict's own `sft` and `gigpo` runs of the seed (read, never rerun); the RL phase's rate chosen
on validation tasks on the verdict's tuning seed; intervals over seeds.

Jobs (each resumable, under --runs; the verdict's folder and results are only read):

    warm/seedN           the verdict's warm start (adopted from --verdict-runs, or rebuilt here by
                         the verdict's own warm job when its model is not on this machine)
    sft_half/seedN       the SFT phase: half of the verdict's gigpo/seedN steps (of its chosen-rate
                         tuning run on seed 100), at the verdict's chosen SFT rate
    tune/then_gigpo/lrX  on seed 100: the RL phase at rate X from sft_half/seed100, scored on the
                         verdict's validation tasks
    then_gigpo/seedN     the RL phase at the chosen rate from sft_half/seedN: the arm's final model

--out is rewritten as each job lands: per seed the phases' compute against the GiGPO run's, the
half-SFT model's held-out success (the RL phase's own "before"), the arm's final success beside the
verdict's sft and gigpo, the comparisons, and every job with its per-task outcomes.

    python benchmarks/learning/sft_then_rl.py --verdict-runs runs/verdict_tiny --parallel 2
    python benchmarks/learning/sft_then_rl.py --report-only      # rewrite --out from the finished runs

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
from benchmarks.learning import verdict_runs  # noqa: E402  (the verdict's runs, read)
from benchmarks.learning.rl_vs_baselines import run_sft_arm, validation_file  # noqa: E402

SETTING = "tiny"
SEEDS = verdict.SEEDS
TUNE_SEED = verdict.TUNE_SEED
ARM = "then_gigpo"  # the arm's RL phase; its first phase is sft_half
BUDGET_TOLERANCE = 0.10  # the two phases' total steps or tokens further from GiGPO's is flagged


def rl_iterations(args) -> int:
    """Half the preset's iterations (the verdict's GiGPO runs the whole)."""
    return verdict.config(args, 0, Path(args.runs)).iterations // 2


def chosen_rates(whole: dict) -> dict:
    """The verdict's chosen rates (`whole`: its results, docs/verdict.json): SFT's is used as it is,
    GiGPO's names the tuning run whose compute the seed-100 SFT phase halves. One line while the
    verdict has not chosen."""
    chosen = whole.get("lr_choice", {}).get("chosen", {})
    if not {"sft", "gigpo"} <= set(chosen):
        raise SystemExit("the verdict has not chosen its sft and gigpo rates yet: finish its tuning runs first")
    return {arm: float(chosen[arm]) for arm in ("sft", "gigpo")}


def gigpo_run(rates: dict, seed: int) -> str:
    """The verdict's GiGPO job whose compute the seed's two phases share (`rates`: chosen_rates)."""
    return rr.tune_key("gigpo", rates["gigpo"]) if seed == TUNE_SEED else f"gigpo/seed{seed}"


def half_budget(gigpo_compute: dict) -> dict:
    """Half of a GiGPO run's optimizer steps (rounded down) and the tokens at its tokens per step:
    run_sft_arm sizes its batches from tokens per step, so the SFT phase's batches are the sft arm's."""
    steps = gigpo_compute["optimizer_steps"] // 2
    if steps < 1:
        raise SystemExit(f"the GiGPO run made {gigpo_compute['optimizer_steps']} optimizer steps: nothing to halve")
    return {"optimizer_steps": steps, "tokens": gigpo_compute["tokens"] * steps / gigpo_compute["optimizer_steps"]}


# --- the jobs -------------------------------------------------------------------------------------
def jobs(args) -> list[rr.Job]:
    """Seed 100's SFT phase and tuning runs first (every final RL phase waits for the choice), then
    seed by seed: warm start, SFT phase, RL phase."""
    tune_warm, tune_half = f"warm/seed{TUNE_SEED}", f"sft_half/seed{TUNE_SEED}"
    tunes = tuple(rr.tune_key(ARM, lr) for lr in args.grid)
    out = [rr.Job(tune_warm), rr.Job(tune_half, (tune_warm,))] + [rr.Job(key, (tune_half,)) for key in tunes]
    for seed in args.seeds:
        out += [rr.Job(f"warm/seed{seed}"), rr.Job(f"sft_half/seed{seed}", (f"warm/seed{seed}",)),
                rr.Job(f"{ARM}/seed{seed}", (f"sft_half/seed{seed}", *tunes))]
    return out


def chosen_lr(table, args) -> float:
    """The RL phase's rate: the best validation success of its tuning runs."""
    return rr.best_rate(table, ARM, args.grid)


def run_job(args, key: str) -> dict:
    """One job, in this process."""
    if key.startswith("warm/"):
        return {**verdict.run_one(args, key), "code_version": code_version()}
    table = rr.DoneTable(Path(args.runs) / "done.json")  # read only: the scheduler writes it
    folder = rr.job_dir(Path(args.runs), key)
    if key.startswith("sft_half/"):
        seed = rr.arm_and_seed(key)[1]
        cfg = verdict.config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]))
        rr.use_threads(cfg)
        whole, records = verdict_runs.verdict_results(args)
        rates = chosen_rates(whole)
        matched = gigpo_run(rates, seed)
        if matched not in records:
            raise SystemExit(f"{key}: the verdict's {matched} has not finished: its compute is this phase's budget")
        budget = half_budget(records[matched]["compute"])
        lr = rates["sft"]
        kind = "sft_filtered" if cfg.sft.filter_success else "sft_unfiltered"
        stats = run_sft_arm(cfg, folder, kind, budget, lr, seed, print, micro_batch_size=cfg.ppo.micro_batch_size)
        from agentgym.trainers.checkpoint import latest_checkpoint

        return {"seed": seed, "lr": lr, "matched_to": matched, "model": str(latest_checkpoint(folder) / "model"),
                "compute": {"optimizer_steps": stats["steps"], "tokens": stats["tokens"], "rollout_episodes": 0},
                "train": stats, "cpu_seconds": process_cpu_seconds(), "code_version": code_version()}
    tuning = key.startswith("tune/")
    if tuning:
        seed, lr = TUNE_SEED, float(key.rsplit("/lr", 1)[1])
    else:
        seed, lr = rr.arm_and_seed(key)[1], chosen_lr(table, args)
    cfg = verdict.config(args, seed, folder, *rr.warm_overrides(table[f"sft_half/seed{seed}"]), f"ppo.lr={lr}",
                         f"iterations={rl_iterations(args)}")
    rr.use_threads(cfg)
    job = rr.ArmJob(key, ARM, seed, lr, tuning, None)
    evals = rr.arm_evals(cfg, job, folder, lambda: validation_file(args, cfg, folder))
    return {"arm": ARM, "seed": seed, **rr.run_rl(cfg, folder, evals), "cpu_seconds": process_cpu_seconds(),
            "code_version": code_version()}


# --- the figures ----------------------------------------------------------------------------------
def seed_row(seed: int, half: dict | None, rl: dict | None, records: dict) -> dict:
    """One seed: the phases' compute against the GiGPO run's, and held-out success at each stage."""
    gigpo, sft, warm = records.get(f"gigpo/seed{seed}"), records.get(f"sft/seed{seed}"), None
    row = {"seed": seed}
    if gigpo:
        warm = gigpo["heldout_before"]["success_rate"]
        row.update(warm_start=warm, gigpo=gigpo["heldout"]["success_rate"],
                   gigpo_compute={k: gigpo["compute"][k] for k in ("optimizer_steps", "tokens", "rollout_episodes")})
    if sft:
        row["sft"] = sft["heldout"]["success_rate"]
    if half and rl:
        total = {k: half["compute"][k] + rl["compute"][k] for k in ("optimizer_steps", "tokens", "rollout_episodes")}
        row.update(half_sft=rl["heldout_before"]["success_rate"], sft_then_gigpo=rl["heldout"]["success_rate"],
                   sft_then_gigpo_unseen=(rl.get("heldout_unseen") or {}).get("success_rate"),
                   compute={"sft_phase": half["compute"], "rl_phase": rl["compute"] | {"iterations": rl["iterations"]},
                            "total": total})
        if gigpo:
            versus = {k: total[k] / gigpo["compute"][k] - 1 for k in ("optimizer_steps", "tokens")}
            row["compute"]["total_vs_gigpo"] = versus
            row["compute"]["over_tolerance"] = any(abs(v) > BUDGET_TOLERANCE for v in versus.values())
    return row


def sentence(primary: dict | None, planned: int, mdd: float | None) -> str:
    """The protocol's sentence, from the primary interval alone."""
    if not primary or primary.get("interval_over_seeds") is None:
        return "not yet: fewer than two seeds have finished"
    low, high = primary["interval_over_seeds"]
    partial = "" if len(primary["seeds"]) == planned else f" (provisional: {len(primary['seeds'])} of {planned} seeds)"
    if low > 0:
        return f"SFT then RL beats SFT alone at equal compute{partial}"
    if high < 0:
        return f"SFT alone beats SFT then RL at equal compute{partial}"
    return f"no difference detected{partial}" + (f"; five seeds detect about {mdd:.3f} in success" if mdd else "")


def report(args, table) -> dict:
    import statistics

    whole, records = verdict_runs.verdict_results(args)
    found = {"sft_then_gigpo": {}, "sft": {}, "gigpo": {}, "half_sft": {}}
    rows = []
    for seed in args.seeds:
        half, rl = table.done.get(f"sft_half/seed{seed}"), table.done.get(f"{ARM}/seed{seed}")
        rows.append(seed_row(seed, half, rl, records))
        if rl:
            found["sft_then_gigpo"][seed] = rl
            found["half_sft"][seed] = {"heldout": rl["heldout_before"]}
        for arm in ("sft", "gigpo"):
            if f"{arm}/seed{seed}" in records:
                found[arm][seed] = records[f"{arm}/seed{seed}"]
    arms = {}
    for arm, by_seed in found.items():
        finals = [by_seed[s]["heldout"]["success_rate"] for s in sorted(by_seed)]
        arms[arm] = {"seeds": sorted(by_seed), "mean": statistics.fmean(finals) if finals else None,
                     "interval_over_seeds": rr.seed_interval(finals)}
    planned = len(args.seeds)
    primary = verdict_runs.difference(found, "sft_then_gigpo", "sft", planned)
    n_tasks = len(next(iter(found["sft_then_gigpo"].values()))["heldout"]["per_task_success"]) \
        if found["sft_then_gigpo"] else None
    mdd = None
    if n_tasks:
        from agentgym.evaluation.stats import min_detectable_difference
        mdd = min_detectable_difference(n_tasks * planned, verdict.config(args, 0, Path(args.runs)).eval.episodes_per_task)
    tunes = {f"{lr:g}": table[rr.tune_key(ARM, lr)]["validation"]["success_rate"]
             for lr in args.grid if rr.tune_key(ARM, lr) in table}
    own = [key for key in table.done if not key.startswith("warm/") or table[key].get("source") is None]
    all_jobs = jobs(args)
    return {
        "protocol": "docs/sft_then_rl_protocol.md",
        "command": command(__file__, ["--verdict-runs", "VERDICT_RUNS", "--runs", "RUNS",
                                      *(["--", *args.overrides] if args.overrides else [])]),
        "code_version": ", ".join(sorted({table[k].get("code_version", "unknown") for k in own} or {code_version()})),
        "verdict": {"results": "docs/verdict.json", "setting": SETTING, "code_version": whole.get("code_version")},
        "preset": args.preset, "overrides": verdict.job_overrides(args), "seeds": list(args.seeds),
        "rl_iterations": rl_iterations(args),
        "lr_choice": {"sft_phase": whole.get("lr_choice", {}).get("chosen", {}).get("sft"),
                      "rl_phase_grid": tunes,
                      "rl_phase": chosen_lr(table, args) if len(tunes) == len(args.grid) else None},
        "seed_rows": rows,
        "arms": arms,
        "primary": {"comparison": "sft_then_gigpo - sft", **(primary or {})},
        "secondary": {"comparison": "sft_then_gigpo - gigpo",
                      **(verdict_runs.difference(found, "sft_then_gigpo", "gigpo", planned) or {})},
        "rl_phase_gain": {"comparison": "sft_then_gigpo - half_sft",
                          **(verdict_runs.difference(found, "sft_then_gigpo", "half_sft", planned) or {})},
        "sentence": sentence(primary, planned, mdd),
        "jobs_done": f"{sum(j.key in table for j in all_jobs)} of {len(all_jobs)}",
        # the jobs run here, per-task outcomes included: they seed the done-table of a new --runs folder
        "jobs": {k: verdict_runs.portable(table[k], args) for k in own},
    }


def restore(args, run_root: Path) -> None:
    """Seed this --runs folder's done-table from the jobs recorded in --out. Warm starts are the
    verdict's (found again, or rebuilt); an SFT phase whose model is not on this machine is left to
    run again when an RL phase still needs it (SFT from the seed is repeatable)."""
    out = Path(args.out)
    if not out.is_file():
        return
    table = rr.DoneTable(run_root / "done.json")
    recorded = json.loads(out.read_text()).get("jobs", {})
    needed = {k for j in jobs(args) if j.key not in recorded for k in j.after}
    for key, record in recorded.items():
        if key in table or key.startswith("warm/"):
            continue
        record = verdict.local(record, run_root)
        if key.startswith("sft_half/") and key in needed and not Path(record["model"]).is_dir():
            continue
        table.mark(key, record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--grid", type=float, nargs="+", default=list(verdict.SETTINGS[SETTING].grids["gigpo"]),
                        help="the RL phase's rates (the protocol's: the verdict's GiGPO grid)")
    parser.add_argument("--val-tasks", type=int, default=100, help="validation tasks for the RL phase's rate")
    verdict_runs.add_arguments(parser, SETTING, "sft_then_rl")
    args = parser.parse_args()
    if TUNE_SEED in args.seeds:
        parser.error(f"--seeds: seed {TUNE_SEED} is the tuning seed, never a reported one")
    setting = verdict.SETTINGS[SETTING]
    args.setting, args.preset, args.grids = SETTING, setting.preset, dict(setting.grids)
    args.tune_seed, args.ceiling = TUNE_SEED, False
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key))
        return
    whole, records = verdict_runs.verdict_results(args)
    verdict_runs.check_verdict_settings(args, whole)
    chosen_rates(whole)
    if not args.report_only:
        rr.check_settings(run_root, {"overrides": verdict.job_overrides(args), "grid": args.grid,
                                     "val_tasks": args.val_tasks})
    restore(args, run_root)
    all_jobs = jobs(args)
    if not args.report_only:
        verdict_runs.adopt_warm_starts(args, rr.DoneTable(run_root / "done.json"), records, all_jobs)
    out, failed = rr.schedule(args, all_jobs, report, __file__, run_root)
    for row in out["seed_rows"]:
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items() if k != "compute"
               and not k.endswith("_compute")})
    if "mean" in out["primary"]:
        print(f"primary: {out['primary']['comparison']} {out['primary']['mean']:+.3f} "
              f"{out['primary']['interval_over_seeds']}: {out['sentence']}")
    print(f"{out['jobs_done']} jobs done; wrote {args.out}")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
