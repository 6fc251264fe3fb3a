"""On-policy distillation against RL from the same warm start, at equal optimizer steps (docs/results.md).

Teacher: a household-tiny model after RL (--teacher: the main job's final model, or any RL-trained
model of the warm start's tokenizer). Student: the same warm start (--warm-start, the main job's SFT
model). Two arms per seed, each --iterations iterations of --tasks-per-iter tasks x the preset's 6
episodes, one optimizer step per iteration in both (ppo.minibatch_size above any batch's sample
count), everything else the household-tiny preset:

    opd   distill.teacher=<teacher>, distill.reward_coef=0: the advantage of every sampled token is
          log pi_teacher - log pi_student (trainers/distill.py)
    rl    the preset's GiGPO advantage

Evaluation: each arm's final model, and the warm start, on the preset's held-out tasks (the 234 of
its categories) x --eval-episodes, sampled at the preset's eval temperature, with the run's seed;
per-task outcomes are kept. Per seed, d = success(opd) - success(rl) on the same tasks; the interval
over seeds is the t-interval of the paired differences (df = seeds - 1). The training runs evaluate
on one task only (their own before/after figures are not used).

One process, one thread; each finished run and evaluation is written to --out at once and skipped
when the command is run again (the runs are long on a shared CPU):

    python benchmarks/learning/distill_household.py --warm-start runs/main_job/sft_model \\
        --teacher runs/main_job/final_model --seeds 0,1,2 --out docs/distill_household.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import provenance  # noqa: E402
from benchmarks.harness.jobs import seed_interval  # noqa: E402

def sha256(path: Path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()[:16]


def _per_iteration(run_dir: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    keep = ("rollout/success_rate", "rollout/response_tokens", "distill/reverse_kl_mean", "train/optimizer_steps",
            "train/tokens", "train/samples", "time/iteration_cpu_s", "mismatch/kl_mean")
    return [{k: m[k] for k in keep if k in m} for m in lines if "rollout/success_rate" in m]


def summarize(record: dict, seeds: list[int], arms: list[str]) -> dict:
    """Each arm's held-out success per seed and its mean; per pair of arms the per-seed differences
    on the same tasks with their mean and t-interval over seeds."""
    def success(name: str) -> float | None:
        return record["evals"][name]["success_rate"] if name in record["evals"] else None

    summary = {}
    for arm in [*arms, "warm_start"]:
        values = [v for s in seeds if (v := success(f"{arm}/seed{s}")) is not None]
        summary[arm] = {"per_seed": values, "mean": statistics.fmean(values) if values else None}
    for arm in arms:  # the budget each arm used: optimizer steps, sampled and trained tokens, CPU
        runs = [record["runs"][f"{arm}/seed{s}"] for s in seeds if f"{arm}/seed{s}" in record["runs"]]
        summary[arm]["budget"] = {key: [sum(i.get(logged, 0) for i in run["per_iteration"]) for run in runs]
                                  for key, logged in (("optimizer_steps", "train/optimizer_steps"),
                                                      ("sampled_tokens", "rollout/response_tokens"),
                                                      ("trained_tokens", "train/tokens"))}
        summary[arm]["budget"]["cpu_s"] = [run["cpu_s"] for run in runs]
    for a, b in (("opd", "rl"), ("opd", "warm_start"), ("rl", "warm_start")):
        diffs = [success(f"{a}/seed{s}") - success(f"{b}/seed{s}") for s in seeds
                 if success(f"{a}/seed{s}") is not None and success(f"{b}/seed{s}") is not None]
        summary[f"{a}_minus_{b}"] = {"per_seed": diffs, "mean": statistics.fmean(diffs) if diffs else None,
                                     "t_interval_95": seed_interval(diffs)}
    summary["cpu_s_total"] = sum(r["cpu_s"] for r in record["runs"].values()) + sum(
        e["cpu_s"] for e in record["evals"].values())  # every run and evaluation, one thread
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-start", required=True, help="the student's start: the main job's SFT model")
    parser.add_argument("--teacher", required=True, help="an RL-trained model of the warm start's tokenizer")
    parser.add_argument("--out", default="docs/distill_household.json")
    parser.add_argument("--work", default="runs/distill_household")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--arms", default="opd,rl")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--tasks-per-iter", type=int, default=2)
    parser.add_argument("--eval-tasks", type=int, default=234)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (key=value)")
    args = parser.parse_args()

    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.trainers.config import load_config
    from agentgym.trainers.task_selection import write_eval_tasks
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import eval_summary, heldout_result, train

    set_torch_threads(1, print)
    work, out = Path(args.work), Path(args.out)
    warm, teacher = Path(args.warm_start), Path(args.teacher)
    seeds, arms = [int(s) for s in args.seeds.split(",")], args.arms.split(",")
    common = ["torch_threads=1", "log.tensorboard=false", "log.plot=false", "log.save_trajectories_every=0",
              "checkpoint_every=0", "time_budget_s=null", "tiny.build=false", "sft.enabled=false",
              f"policy.model={warm}", f"iterations={args.iterations}", f"rollout.tasks_per_iter={args.tasks_per_iter}",
              "ppo.minibatch_size=100000", "eval.num_tasks=1", "eval.episodes_per_task=1", *args.overrides]
    arm_overrides = {"opd": [f"distill.teacher={teacher}", "distill.reward_coef=0"], "rl": []}
    record = json.loads(out.read_text()) if out.is_file() else {}
    if record.get("command_args") not in (None, sys.argv[1:]):
        raise SystemExit(f"{out} holds another command's results: move it away or run with its arguments")
    record.setdefault("code_version", provenance.code_version())  # the commit the first of the runs started at
    record.update({
        "command": provenance.command(__file__, sys.argv[1:]), "command_args": sys.argv[1:],
        "setup": {"preset": "household-tiny", "warm_start": str(warm), "warm_start_sha256": sha256(warm),
                  "teacher": str(teacher), "teacher_sha256": sha256(teacher), "iterations": args.iterations,
                  "teacher_heldout": "the main job's final evaluation: docs/results/main_job.json, after",
                  "episodes_per_iteration": f"{args.tasks_per_iter} tasks x the preset's group_size",
                  "optimizer_steps_per_iteration": 1, "common_overrides": common, "arm_overrides": arm_overrides,
                  "eval_tasks": args.eval_tasks, "eval_episodes_per_task": args.eval_episodes, "seeds": seeds}})
    record.setdefault("runs", {})
    record.setdefault("evals", {})

    def save() -> None:
        record["summary"] = summarize(record, seeds, arms)
        out.write_text(json.dumps(record, indent=1) + "\n")

    eval_cfg = load_config("household-tiny", [f"eval.num_tasks={args.eval_tasks}",
                                              f"eval.episodes_per_task={args.eval_episodes}"])
    work.mkdir(parents=True, exist_ok=True)
    manifest = write_eval_tasks(eval_cfg.eval, eval_cfg.env, get_task_space(eval_cfg.env.id), work)

    def evaluate(name: str, model: Path, seed: int) -> None:
        if name in record["evals"]:
            return
        c0, t0 = time.process_time(), time.perf_counter()
        policy = HFPolicy(str(model))
        ev = eval_summary(heldout_result(eval_cfg.eval, eval_cfg.env, policy, manifest, seed, eval_cfg.rollout))
        record["evals"][name] = {"model": str(model), "seed": seed, "success_rate": ev["success_rate"],
                                 "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0,
                                 "load_1min": os.getloadavg()[0],
                                 "per_task_success": ev["per_task_success"]}
        save()
        print(f"eval {name}: {ev['success_rate']:.3f}", flush=True)

    for seed in seeds:
        for arm in arms:
            name = f"{arm}/seed{seed}"
            run_dir = work / arm / f"seed{seed}"
            if name not in record["runs"]:
                c0, t0 = time.process_time(), time.perf_counter()
                train(load_config("household-tiny", common + arm_overrides[arm] + [
                    f"seed={seed}", f"name=distill-{arm}-{seed}", f"run_dir={run_dir}"]), overwrite=True)
                record["runs"][name] = {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0,
                                        "load_1min": os.getloadavg()[0],
                                        "per_iteration": _per_iteration(run_dir)}
                save()
            evaluate(name, run_dir / "final_model", seed)
    for seed in seeds:  # references, after the comparison itself
        evaluate(f"warm_start/seed{seed}", warm, seed)
    save()
    print(json.dumps(record["summary"], indent=1), flush=True)


if __name__ == "__main__":
    main()
