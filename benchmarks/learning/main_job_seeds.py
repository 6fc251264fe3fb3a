"""The main job on several seeds, with its honest baseline: does RL lift held-out success?

For each seed: `agentgym train household-tiny seed=S` (tiny model -> SFT warm start -> RL -> final
held-out evaluation), then the baseline: the same warm start trained on with more SFT (fresh expert
trajectories, the RL learning rate) for as much wall time as RL took, evaluated on the same tasks
with the same seed. Writes docs/main_job.json:

    heldout_tasks, episodes_per_task,
    seeds:  [{seed, before, after, gain, gain_ci, sft_same_time, sft_same_time_gain, wall_s, rl_s, iterations}]
    pooled: {gain, gain_ci}

`gain_ci` is a paired per-task bootstrap (95%) of after - before on one seed's evaluations; the
pooled interval resamples seeds and tasks together (a two-level bootstrap), so it carries the
seed-to-seed spread of training as well as the evaluation noise. Successes are fractions; the
evaluation is the final one of each run, never the best one seen.

    python benchmarks/learning/main_job_seeds.py                        # seeds 0 1 2, one after another
    python benchmarks/learning/main_job_seeds.py --parallel 2           # two seeds at a time, one thread each
    python benchmarks/learning/main_job_seeds.py --seeds 0 --out /tmp/x.json iterations=4   # any config override
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run_seed(seed: int, run_root: Path, overrides: list[str], threads: int | None) -> dict:
    """One seed: the preset's run, then the SFT-for-the-same-time baseline. Returns its record."""
    from agentgym.registration import get_task_space
    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import evaluate_policy, train
    from agentgym.trainers.run_setup import quiet_transformers, make_policy
    from agentgym.trainers.task_selection import select_train_tasks
    from agentgym.trainers.sft import oracle_trajectories, sft_samples, train_sft
    from agentgym.evaluation.stats import paired_gain

    run_dir = run_root / f"seed{seed}"
    extra = [f"torch_threads={threads}"] if threads else []
    cfg = load_config("household-tiny", [f"seed={seed}", f"run_dir={run_dir}", *extra, *overrides])
    summary = train(cfg, log=lambda line: print(f"[seed {seed}] {line}", flush=True))
    state = json.loads(sorted((run_dir / "checkpoints").glob("iter_*/state.json"))[-1].read_text())
    before = state["evals"][0]["per_task_success"]
    after = state["evals"][-1]["per_task_success"]

    # The baseline: continue the warm start with SFT for the wall time RL took (expert data collection
    # included), on fresh expert trajectories of the whole training pool, at the RL learning rate.
    quiet_transformers()
    policy = make_policy(cfg.policy, run_dir / "sft_model")
    t0 = time.perf_counter()
    tasks = select_train_tasks(cfg.env, get_task_space(cfg.env.id), cfg.seed)
    trajectories = oracle_trajectories(cfg.env.id, tasks, cfg.env.chat, cfg.env.env_kwargs, seed=seed + 1000,
                                       slip_prob=cfg.sft.slip_prob, search=cfg.sft.expert == "searching",
                                       dawdle_prob=cfg.sft.dawdle_prob)
    samples = sft_samples(policy, trajectories)
    budget = max(summary["rl_seconds"] - (time.perf_counter() - t0), 1.0)
    stats = train_sft(policy, samples, epochs=1000, lr=cfg.ppo.lr, batch_size=cfg.sft.batch_size, seed=seed + 1000,
                      max_seconds=budget)
    sft_seconds = time.perf_counter() - t0
    ev = evaluate_policy(cfg.eval, cfg.env, policy, run_dir / f"eval_{cfg.eval.split}.jsonl", cfg.seed,
                         rollout=cfg.rollout)
    baseline = ev["per_task_success"]
    gain = paired_gain(before, after, seed=seed)
    sft_gain = paired_gain(before, baseline, seed=seed)
    return {
        "seed": seed, "before": summary["heldout_success_before"], "after": summary["heldout_success_after"],
        "gain": gain.value, "gain_ci": [gain.low, gain.high],
        "sft_same_time": ev["success_rate"], "sft_same_time_gain": sft_gain.value,
        "sft_same_time_gain_ci": [sft_gain.low, sft_gain.high], "sft_same_time_steps": stats["steps"],
        "sft_same_time_s": sft_seconds, "wall_s": summary["wall_seconds"], "rl_s": summary["rl_seconds"],
        "iterations": summary["iterations"], "stopped_early": summary["stopped_early"],
        "heldout_tasks": len(after), "per_task": {"before": before, "after": after, "sft_same_time": baseline},
        "invalid_rate": {"before": state["evals"][0].get("invalid_action_rate"),
                         "after": state["evals"][-1].get("invalid_action_rate")},
        "curve": [{"iteration": e["iteration"], "success_rate": e["success_rate"]} for e in state["evals"]],
        "mean_steps_before_after": [state["evals"][0].get("mean_steps"), state["evals"][-1].get("mean_steps")],
    }


def pooled_gain(records: list[dict], resamples: int = 10000, seed: int = 0) -> dict:
    """Mean gain over seeds and tasks; 95% interval from resampling seeds and tasks together."""
    import numpy as np

    tasks = sorted(set.intersection(*(set(r["per_task"]["after"]) for r in records)))
    diffs = np.array([[r["per_task"]["after"][t] - r["per_task"]["before"][t] for t in tasks] for r in records])
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, len(records), size=(resamples, len(records)))
    picks = rng.integers(0, len(tasks), size=(resamples, len(tasks)))
    stats = np.array([diffs[s][:, p].mean() for s, p in zip(seeds, picks)])
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return {"gain": float(diffs.mean()), "gain_ci": [float(lo), float(hi)], "tasks": len(tasks),
            "method": "two-level bootstrap over seeds and tasks"}


def plot(out_json: Path, run_root: Path, png: Path) -> None:
    """Training success per iteration (each seed, from metrics.jsonl) and held-out success before
    RL, after RL and after the same time of SFT (each seed, from the json)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from agentgym.trainers.logging_utils import read_metrics

    data = json.loads(out_json.read_text())
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for record in data["seeds"]:
        rows = [r for r in read_metrics(run_root / f"seed{record['seed']}") if "rollout/success_rate" in r]
        left.plot([r["iteration"] for r in rows], [r["rollout/success_rate"] for r in rows], alpha=0.8,
                  label=f"seed {record['seed']}")
    left.set(xlabel="RL iteration", ylabel="training success (48 episodes)", title="GiGPO on fresh tasks")
    left.legend()
    labels = ["warm start", "after RL", "SFT for the same time"]
    for i, record in enumerate(data["seeds"]):
        values = [record["before"], record["after"], record["sft_same_time"]]
        right.bar([x + 0.25 * i for x in range(3)], values, width=0.25, label=f"seed {record['seed']}")
    right.set_xticks([x + 0.25 for x in range(3)], labels)
    pooled = data["pooled"]
    right.set(ylabel="held-out success", title=f"{data['heldout_tasks']} held-out tasks x {data['episodes_per_task']}: "
              f"gain {pooled['gain']:+.3f} [{pooled['gain_ci'][0]:+.3f}, {pooled['gain_ci'][1]:+.3f}]")
    right.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--parallel", type=int, default=1, help="seeds run at once (each with one thread)")
    parser.add_argument("--runs", default="runs/main_job", help="run folders go here")
    parser.add_argument("--out", default=str(ROOT / "docs" / "main_job.json"))
    parser.add_argument("--one-seed", type=int, help=argparse.SUPPRESS)  # internal: a worker process
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG from --out and --runs")
    parser.add_argument("overrides", nargs="*", help="config overrides, as for agentgym train")
    args = parser.parse_args()
    run_root = Path(args.runs)
    png = Path(args.out).with_suffix(".png")
    if args.plot_only:
        plot(Path(args.out), run_root, png)
        return

    if args.one_seed is not None:
        record = run_seed(args.one_seed, run_root, args.overrides, args.threads)
        (run_root / f"seed{args.one_seed}.json").write_text(json.dumps(record, indent=1))
        return

    run_root.mkdir(parents=True, exist_ok=True)
    threads = 1 if args.parallel > 1 else None
    pending, running = list(args.seeds), []
    while pending or running:
        while pending and len(running) < args.parallel:
            seed = pending.pop(0)
            cmd = [sys.executable, __file__, "--one-seed", str(seed), "--runs", str(run_root), *args.overrides]
            if threads:
                cmd += ["--threads", str(threads)]
            log = open(run_root / f"seed{seed}.log", "w")
            running.append((seed, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
            print(f"seed {seed}: started (log {run_root / f'seed{seed}.log'})", flush=True)
        time.sleep(5)
        for item in list(running):
            seed, proc, log = item
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                if proc.returncode != 0:
                    raise SystemExit(f"seed {seed} failed (exit {proc.returncode}): see {run_root / f'seed{seed}.log'}")
                print(f"seed {seed}: done", flush=True)

    records = [json.loads((run_root / f"seed{s}.json").read_text()) for s in args.seeds]
    out = {
        "command": command(__file__, sys.argv[1:]),
        "heldout_tasks": records[0]["heldout_tasks"],
        "episodes_per_task": json.loads((run_root / f"seed{args.seeds[0]}" / "summary.json").read_text())["episodes_per_task"],
        "seeds": [{k: v for k, v in r.items() if k != "per_task"} for r in records],
        "pooled": pooled_gain(records),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("| seed | before | after | gain (95% CI) | SFT for the same time | wall s | RL s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in out["seeds"]:
        print(f"| {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['gain']:+.3f} "
              f"[{r['gain_ci'][0]:+.3f}, {r['gain_ci'][1]:+.3f}] | {r['sft_same_time']:.3f} | {r['wall_s']:.0f} | "
              f"{r['rl_s']:.0f} |")
    plot(Path(args.out), run_root, png)
    p = out["pooled"]
    print(f"pooled gain {p['gain']:+.3f} [{p['gain_ci'][0]:+.3f}, {p['gain_ci'][1]:+.3f}] over "
          f"{out['heldout_tasks']} tasks x {out['episodes_per_task']} episodes x {len(records)} seeds; wrote {args.out}")


if __name__ == "__main__":
    main()
