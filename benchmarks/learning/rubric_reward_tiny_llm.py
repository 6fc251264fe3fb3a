"""A rubric reward on the tiny LLM: household-tiny's GiGPO trained on the env's outcome or on a
rubric's score, from one shared SFT warm start, the judged and verifiable rewards logged together.

The rubric (agentgym.rewards, every criterion checked by code, no judge model): solved (weight 3,
the env's verdict), at most 8 steps (1), no idle look / inventory / examine (1): it pays for what
the main job's demonstrator does badly. Training rollouts get `apply_reward(..., combine=replace)`
before the advantages (the trainer does not read `env.reward` yet, so this script wraps the
trainer's rollout call); evaluation is untouched (held-out success is the env's).

    python benchmarks/learning/rubric_reward_tiny_llm.py                  # 3 seeds x 2 arms, 20 iterations each
    python benchmarks/learning/rubric_reward_tiny_llm.py --iterations 5 --eval-tasks 20 --seeds 1   # smoke

Resumable: the warm start and every finished (arm, seed) run are kept under --runs; a re-run skips
them (an interrupted run resumes from its last checkpoint).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

IDLE = ("look", "inventory", "examine")


def rubric():
    from agentgym.rewards import Criterion, Rubric

    return Rubric([
        Criterion("solved", 3.0, "the task is done", check=lambda t: bool(t.success)),
        Criterion("short", 1.0, "at most 8 steps", check=lambda t: len(t.steps) <= 8),
        Criterion("no_idling", 1.0, "never looks around idly",
                  check=lambda t: not any((s.action or "").split(" ")[0] in IDLE for s in t.steps)),
    ], name="household_rubric")


def child(arm: str, run_dir: Path, overrides: list[str]) -> None:
    """One training run in this process, the rollouts wrapped when arm == 'rubric'."""
    import agentgym.trainers.batches as batches
    from agentgym.rewards import apply_reward

    collect, reward = batches.collect, rubric()
    log = run_dir / "reward_metrics.jsonl"

    def wrapped(*a, **k):
        trajectories = collect(*a, **k)
        if arm == "rubric":
            stats = apply_reward([t for t in trajectories if not t.metadata.get("dropped")], reward).as_dict()
            with log.open("a") as f:
                f.write(json.dumps(stats) + "\n")
        return trajectories

    batches.collect = wrapped
    from agentgym.cli import main

    resume = ["--resume"] if (run_dir / "checkpoints").exists() else []
    sys.argv = ["agentgym", "train", "household-tiny", *overrides, f"run_dir={run_dir}", *resume]
    main()


def per_task(run_dir: Path) -> dict:
    reports = sorted((run_dir / "evals").glob("iter*/report.json"))
    data = json.loads(reports[-1].read_text())
    return {t["task_id"]: t["successes"] / max(t["episodes"], 1) for t in data["per_task"]}, data["overall"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs/rubric_llm")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--eval-tasks", type=int, default=60)
    ap.add_argument("--child", nargs=2, metavar=("ARM", "RUN_DIR"), help=argparse.SUPPRESS)
    args, overrides = ap.parse_known_args()
    if args.child:
        return child(args.child[0], Path(args.child[1]), overrides)
    root = Path(args.runs)
    base = root / "warm_start"
    common = ["torch_threads=1", f"eval.num_tasks={args.eval_tasks}", "eval.episodes_per_task=2"]
    if not (base / "sft_model" / "config.json").exists():
        subprocess.run([str(Path(sys.executable).parent / "agentgym"), "sft", "household-tiny", "--run-dir", str(base),
                        "torch_threads=1"], check=True)
    results = {}
    for seed in range(args.seeds):
        for arm in ("outcome", "rubric"):
            run_dir = root / f"{arm}_seed{seed}"
            if not (run_dir / "summary.json").exists():
                run_dir.mkdir(parents=True, exist_ok=True)
                subprocess.run([sys.executable, __file__, "--child", arm, str(run_dir),
                                f"policy.model={base / 'sft_model'}", "tiny.build=false", "sft.enabled=false",
                                f"seed={seed}", f"iterations={args.iterations}", *common], check=True)
            results[(arm, seed)] = run_dir
    print(f"household-tiny from one SFT warm start, {args.iterations} GiGPO iterations, held-out "
          f"{args.eval_tasks} tasks x 2 episodes, final evaluation")
    print("| seed | held-out, env outcome | held-out, rubric | mean steps, env outcome | mean steps, rubric | "
          "rubric mean, first -> last iteration | env score mean, first -> last |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    diffs = []
    for seed in range(args.seeds):
        (o_tasks, o_all), (r_tasks, r_all) = per_task(results[("outcome", seed)]), per_task(results[("rubric", seed)])
        rows = [json.loads(x) for x in (results[("rubric", seed)] / "reward_metrics.jsonl").read_text().splitlines()]
        common_ids = sorted(set(o_tasks) & set(r_tasks))
        diffs.append([r_tasks[i] - o_tasks[i] for i in common_ids])
        print(f"| {seed} | {o_all['success_rate']['value']:.3f} | {r_all['success_rate']['value']:.3f} | "
              f"{o_all['mean_steps']['value']:.2f} | {r_all['mean_steps']['value']:.2f} | "
              f"{rows[0]['judged_mean']:.3f} -> {rows[-1]['judged_mean']:.3f} | "
              f"{rows[0]['verifiable_mean']:.3f} -> {rows[-1]['verifiable_mean']:.3f} |")
    flat = np.concatenate([np.asarray(d) for d in diffs])
    rng = np.random.default_rng(0)
    boot = [np.mean(rng.choice(flat, size=len(flat))) for _ in range(2000)]
    print(f"held-out success, rubric - outcome: {flat.mean():+.3f} [{np.percentile(boot, 2.5):+.3f}, "
          f"{np.percentile(boot, 97.5):+.3f}] (bootstrap over seeds x tasks, paired per task)")


if __name__ == "__main__":
    main()
