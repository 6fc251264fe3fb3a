"""On-policy distillation against RL from the same warm start, at equal optimizer steps.

A teacher: the household-tiny warm start after RL (GiGPO, the preset's settings, --teacher-iterations),
or --teacher, a model already trained by RL from the same warm start.
Two students from the same warm start, --iterations each, one optimizer step per iteration in both
(ppo.minibatch_size above any batch's sample count), the same rollouts per iteration (8 tasks x 6
episodes):

    opd   distill.teacher=<teacher>, distill.reward_coef=0: the advantage of every sampled token is
          log pi_teacher - log pi_student (trainers/distill.py)
    rl    the preset's GiGPO advantage

Held-out success before and after (the final evaluation) with the paired per-task interval of each
arm's gain, and of OPD minus RL on the same tasks; one seed, one process, one thread:

    python benchmarks/distill_household.py --warm-start runs/rollout_correction/warm/sft_model \\
        --out docs/distill_household.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _per_iteration(run_dir: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    keep = ("rollout/success_rate", "distill/reverse_kl_mean", "train/optimizer_steps", "train/tokens",
            "train/samples")
    return [{k: m[k] for k in keep if k in m} for m in lines if "rollout/success_rate" in m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-start", required=True)
    parser.add_argument("--out", default="docs/distill_household.json")
    parser.add_argument("--work", default="runs/distill_household")
    parser.add_argument("--teacher-iterations", type=int, default=20)
    parser.add_argument("--teacher", help="an RL-trained model of the warm start's tokenizer, instead of training one")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--eval-tasks", type=int, default=234)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (key=value)")
    args = parser.parse_args()

    from agentgym.evaluation.stats import paired_gain
    from agentgym.trainers.config import load_config
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import train

    set_torch_threads(1, print)
    work = Path(args.work)
    common = [f"seed={args.seed}", "torch_threads=1", "log.tensorboard=false", "log.plot=false",
              "log.save_trajectories_every=0", "checkpoint_every=0", "time_budget_s=null", "tiny.build=false",
              "sft.enabled=false", f"policy.model={args.warm_start}", f"eval.num_tasks={args.eval_tasks}",
              f"eval.episodes_per_task={args.eval_episodes}", *args.overrides]
    record = {"command": "python benchmarks/distill_household.py " + " ".join(sys.argv[1:]),
              "setup": {"preset": "household-tiny",
                        "teacher_iterations": None if args.teacher else args.teacher_iterations,
                        "student_iterations": args.iterations, "optimizer_steps_per_iteration": 1,
                        "eval_tasks": args.eval_tasks, "eval_episodes_per_task": args.eval_episodes, "seed": args.seed},
              "runs": {}}

    def run(name: str, overrides: list[str]) -> None:
        run_dir = work / name
        t0 = time.perf_counter()
        summary = train(load_config("household-tiny", common + [f"name=distill-{name}", f"run_dir={run_dir}",
                                                                *overrides]), overwrite=True)
        record["runs"][name] = {"overrides": overrides, "heldout_before": summary["heldout_success_before"],
                                "heldout_after": summary["heldout_success_after"],
                                "heldout_gain": summary["heldout_gain"], "heldout_gain_ci": summary["heldout_gain_ci"],
                                "wall_s": time.perf_counter() - t0, "per_iteration": _per_iteration(run_dir)}
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"{name}: {summary['heldout_success_before']:.3f} -> {summary['heldout_success_after']:.3f}", flush=True)

    teacher = args.teacher
    if teacher is None:
        run("teacher", [f"iterations={args.teacher_iterations}"])
        teacher = work / "teacher" / "final_model"
    record["setup"]["teacher"] = str(teacher)
    one_step = ["ppo.minibatch_size=100000", f"iterations={args.iterations}"]
    run("opd", one_step + [f"distill.teacher={teacher}", "distill.reward_coef=0"])
    run("rl", one_step)

    def final_per_task(name: str) -> dict:
        """The final evaluation's success per held-out task (metrics.jsonl's eval/per_task_success/<id>)."""
        lines = [json.loads(x) for x in (work / name / "metrics.jsonl").read_text().splitlines() if x.strip()]
        last = [m for m in lines if "eval/success_rate" in m][-1]
        return {k.split("/", 2)[2]: v for k, v in last.items() if k.startswith("eval/per_task_success/")}

    diff = paired_gain(final_per_task("rl"), final_per_task("opd"), seed=args.seed)
    record["opd_minus_rl"] = {"value": diff.value, "ci": [diff.low, diff.high]}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"OPD - RL: {diff.value:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]", flush=True)


if __name__ == "__main__":
    main()
