"""RL lifts a real pretrained model (issue 47, item 3): SmolLM2-135M-Instruct with LoRA on household
(the household-smol preset, GiGPO) against RFT at the same compute, each evaluated before and after
on the preset's held-out tasks; results in docs/real_llm.json under "rl_table".

Per seed, two runs, in this order (one at a time; `--parallel 2` runs two, e.g. rl/seed0 beside rl/seed1):

    rl/seedN    the preset's RL run: held-out success before RL (the zero-shot start), `iterations`
                of GiGPO, held-out success after (the final model, never the best seen)
    rft/seedN   rejection-sampling fine-tuning from the same start model (benchmarks/learning/rl_vs_baselines.py:
                run_rft): the policy plays RL's rollout budget (iterations x tasks_per_iter x
                group_size episodes, sampled as RL samples), its successful episodes' steps join a
                buffer, and it takes exactly the optimizer steps RL took in each iteration, in batches
                of RL's mean samples per step (its samples are the policy's own steps, as RL's are, so
                the tokens trained match RL's up to the lengths of the steps drawn; both are recorded)

Before: one evaluation per seed, the RL run's first. Both arms of a seed start from the same model
and play the same held-out episodes (tasks and reset seeds) at the same sampling seed, so RFT's
"before" is that same evaluation. The lift of an arm is its final success minus the start's,
paired per task within a seed and pooled over seeds (a task-level bootstrap interval), and over
seeds (a t-interval of the per-seed lifts, which holds training's seed-to-seed spread); RL - RFT
likewise.

Every run has its folder under --runs and its own checkpoints (RL every 2 iterations, RFT every
iteration); <runs>/done.json lists the finished ones. Run the same command again to resume:
finished runs are skipped, an unfinished one continues from its last checkpoint (the trainer
checkpoints its evaluation before RL too: a run killed in its first iterations keeps it). The JSON is rewritten
as each run lands, keeping the file's other keys (the zero-shot rows).

    python benchmarks/learning/real_llm_rl.py                         # seeds 0 1 2: rl/seed0, rft/seed0, rl/seed1, ...
    python benchmarks/learning/real_llm_rl.py --report                # the table, from docs/real_llm.json
    python benchmarks/learning/real_llm_rl.py --seeds 0 --runs /tmp/x --out /tmp/x.json -- iterations=1 ...

Config overrides (for both arms) come last, after `--`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402
from benchmarks.harness import jobs as rr  # noqa: E402  (benchmarks/harness/jobs.py)
from benchmarks.learning.rl_vs_baselines import NoSuccessfulRollouts, run_rft_arm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PRESET = "household-smol"
KEY = "rl_table"  # docs/real_llm.json's key for this table
# Checkpoints every 2 iterations (an iteration is minutes of CPU); evaluations only before and after;
# no safety stop (a resumed run restarts the clock, and a run is defined by its iterations); the
# update's matrix multiplies in bf16 (1.24x faster here, docs/real_model_speed.md; refused in one line
# on hardware without native bf16: add `-- ppo.matmul_dtype=fp32` there).
SETTING = ["checkpoint_every=2", "eval.every=0", "time_budget_s=null", "log.save_trajectories_every=0",
           "log.plot=false", "log.tensorboard=false", "ppo.matmul_dtype=bf16"]
ARMS = ("rl", "rft")


def config(args, seed: int, folder: Path, *extra: str):
    from agentgym.trainers.config import load_config

    threads = [f"torch_threads={args.threads}"] if args.threads else []
    return load_config(PRESET, [*SETTING, *args.overrides, f"seed={seed}", f"run_dir={folder}", *threads, *extra])


def jobs(seeds) -> list[rr.Job]:
    """rl/seedN then rft/seedN (which matches its compute), seed by seed: the scheduler starts the
    first ready job in this order, so a seed's pair lands before the next seed begins."""
    return [job for s in seeds for job in (rr.Job(f"rl/seed{s}"), rr.Job(f"rft/seed{s}", (f"rl/seed{s}",)))]


def start_model(cfg, folder: Path) -> str:
    """What the RL run in `folder` started from: its SFT warm start where the config has one
    (trainers/run_setup.py:prepare_start_model writes it there), else policy.model."""
    return str((folder / "sft_model").resolve()) if cfg.sft.enabled else cfg.policy.model


def rft_budget(rl_result: dict) -> tuple[list[int], int]:
    """RFT's optimizer steps of each iteration (RL's) and its batch size (RL's mean samples per step)."""
    compute = rl_result["compute"]
    if not compute["optimizer_steps"]:
        raise NoSuccessfulRollouts(f"the RL run of seed {rl_result['seed']} made no optimizer steps (no group had a "
                                   "success and a failure): RFT has no compute to match")
    return compute["steps_per_iteration"], max(1, round(compute["samples"] / compute["optimizer_steps"]))


def iteration_cpu_seconds(run_dir: Path) -> list[float]:
    """CPU seconds of each iteration the trainer logged (time/iteration_cpu_s), the last log of each."""
    from agentgym.trainers.logging_utils import read_metrics

    last = {int(r["iteration"]): r["time/iteration_cpu_s"] for r in read_metrics(run_dir)
            if "time/iteration_cpu_s" in r}
    return [round(last[i], 1) for i in sorted(last)]


def run_job(args, key: str) -> dict:
    table = rr.DoneTable(Path(args.runs) / "done.json")  # read only: the scheduler writes it
    folder = rr.job_dir(Path(args.runs), key)
    arm, seed = rr.arm_and_seed(key)
    if arm == "rl":
        cfg = config(args, seed, folder)
        rr.use_threads(cfg)
        out = rr.run_rl(cfg, folder, {})
        return {"arm": arm, "seed": seed, "start_model": start_model(cfg, folder),
                "iteration_cpu_s": iteration_cpu_seconds(folder), **out}
    rl = table[f"rl/seed{seed}"]
    steps_per_iteration, batch_size = rft_budget(rl)
    cfg = config(args, seed, folder, f"policy.model={rl['start_model']}", "sft.enabled=false")
    rr.use_threads(cfg)
    # its steps' gradients accumulated over passes of the warm start's SFT batch (sft.batch_size): the
    # memory the preset gives an SFT pass (a whole step of 32 samples would not fit)
    stats = run_rft_arm(cfg, folder, steps_per_iteration, batch_size, args.rft_lr, seed, print, cfg.sft.batch_size)
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.run_setup import make_policy

    policy = make_policy(cfg.policy, latest_checkpoint(folder) / "model")
    heldout = rr.evaluate_on(cfg, policy, rr.split_file(cfg, cfg.eval.split, folder))
    return {"arm": arm, "seed": seed, "lr": args.rft_lr, "matched_to": f"rl/seed{seed}", "batch_size": batch_size,
            "compute": {"optimizer_steps": stats["steps"], "tokens": stats["tokens"],
                        "steps_per_iteration": steps_per_iteration,
                        "rl_optimizer_steps": rl["compute"]["optimizer_steps"], "rl_tokens": rl["compute"]["tokens"]},
            "train": stats, cfg.eval.split: heldout, f"{cfg.eval.split}_before": rl[f"{cfg.eval.split}_before"]}


# --- the table ------------------------------------------------------------------------------------
def report(args, table: rr.DoneTable) -> dict:
    import statistics

    done = {arm: [table[f"{arm}/seed{s}"] for s in args.seeds if f"{arm}/seed{s}" in table] for arm in ARMS}
    arms, lift = {}, {}
    for arm, records in done.items():
        after = [r["heldout"]["success_rate"] for r in records]
        before = [r["heldout_before"]["success_rate"] for r in records]
        arms[arm] = {"seeds": [r["seed"] for r in records], "before": before, "after": after,
                     "mean_before": statistics.fmean(before) if before else None,
                     "mean_after": statistics.fmean(after) if after else None,
                     "lr": records[0]["lr"] if records else None,
                     "compute": [{"seed": r["seed"], "optimizer_steps": r["compute"]["optimizer_steps"],
                                  "tokens": r["compute"]["tokens"]} for r in records]}
        if arm == "rl":
            arms[arm]["iteration_cpu_s"] = {r["seed"]: r["iteration_cpu_s"] for r in records}
            arms[arm]["rl_wall_s"] = {r["seed"]: round(r["rl_seconds"]) for r in records}
        lift[arm] = rr.paired_diff([r["heldout"]["per_task_success"] for r in records],
                                   [r["heldout_before"]["per_task_success"] for r in records]) if records else None
    rl = {r["seed"]: r for r in done["rl"]}
    pairs = [r for r in done["rft"] if r["seed"] in rl]
    rl_minus_rft = rr.paired_diff([rl[r["seed"]]["heldout"]["per_task_success"] for r in pairs],
                                  [r["heldout"]["per_task_success"] for r in pairs]) if pairs else None
    first = next((r for rs in done.values() for r in rs), None)
    n_tasks = len(first["heldout"]["per_task_success"]) if first else None
    cfg = config(args, 0, Path(args.runs))
    all_jobs = jobs(args.seeds)
    return {
        "command": command(__file__, sys.argv[1:]),
        "setting": {"preset": PRESET, "overrides": SETTING + args.overrides, "rft_lr": args.rft_lr},
        "heldout_tasks": n_tasks, "episodes_per_task": cfg.eval.episodes_per_task,
        "eval_temperature": cfg.eval.temperature, "arms": arms, "lift": lift, "rl_minus_rft": rl_minus_rft,
        "power": rr.power_statement(n_tasks, cfg.eval.episodes_per_task, len(args.seeds)) if n_tasks else None,
        "runs_done": f"{sum(j.key in table for j in all_jobs)} of {len(all_jobs)}",
    }


def markdown(rl_table: dict) -> str:
    """The table docs/real_llm.md shows: an arm per row, success before and after, the paired lift."""
    def ci(d: dict | None, key: str = "ci") -> str:
        return f"[{d[key][0]:+.3f}, {d[key][1]:+.3f}]" if d and d.get(key) else "-"

    def fmt(x) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = ["| arm | seeds | before | after | lift (paired per task) | over seeds | optimizer steps | tokens |",
             "|---|---|---|---|---|---|---|---|"]
    for arm, a in rl_table["arms"].items():
        lift = rl_table["lift"].get(arm)
        lines.append(f"| {arm} | {', '.join(map(str, a['seeds'])) or '-'} | {fmt(a['mean_before'])} | "
                     f"{fmt(a['mean_after'])} | {fmt(lift and lift['diff'])} {ci(lift)} | {ci(lift, 'seed_ci')} | "
                     f"{sum(c['optimizer_steps'] for c in a['compute'])} | {sum(c['tokens'] for c in a['compute']):,} |")
    d = rl_table.get("rl_minus_rft")
    lines.append(f"\nRL - RFT after training: {fmt(d and d['diff'])} {ci(d)} (over seeds {ci(d, 'seed_ci')}); "
                 f"{rl_table['heldout_tasks']} held-out tasks x {rl_table['episodes_per_task']} episode at temperature "
                 f"{rl_table['eval_temperature']}; runs done: {rl_table['runs_done']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rft-lr", type=float, default=1e-4, help="RFT's learning rate (LoRA, as RL's ppo.lr)")
    parser.add_argument("--runs", default="runs/real_llm_rl")
    parser.add_argument("--out", default=str(ROOT / "docs" / "real_llm.json"))
    parser.add_argument("--report", action="store_true", help=f"print the table from --out's {KEY!r}")
    parser.add_argument("--report-only", action="store_true", help="rewrite --out from the finished runs")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once (each a real model: ~3.5 GB and a core; 2 fit a 2-core, 24 GB machine)")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: one run, in its own process
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for both arms, as for agentgym train")
    args = parser.parse_args()
    if args.report:
        table = json.loads(Path(args.out).read_text()).get(KEY) if Path(args.out).is_file() else None
        if table is None:
            raise SystemExit(f"{args.out} has no {KEY!r} yet: no run has finished (python benchmarks/learning/real_llm_rl.py)")
        print(markdown(table))
        return
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key), (NoSuccessfulRollouts,))
        return
    rr.check_settings(run_root, {"preset": PRESET, "overrides": SETTING + args.overrides, "rft_lr": args.rft_lr})
    out, failed = rr.schedule(args, jobs(args.seeds), report, __file__, run_root,
                              write=lambda path, data: rr.write_json_key(path, KEY, data))
    print(markdown(out))
    print(f"wrote {args.out} ({KEY!r})")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
