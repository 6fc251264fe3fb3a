"""household-smol with bf16 rollouts, `ppo.rollout_correction` off against on, over seeds.

With LoRA and ppo.matmul_dtype=bf16 the policy's frozen base samples in bf16 and the update
multiplies in bf16 (trainers/precision.py): the engine's and the trainer's logprobs of a sampled
token differ. Two arms per seed, the household-smol preset otherwise (its SFT warm start built from
the seed, the same in both arms; 30 GiGPO iterations of 4 tasks x 4 episodes; admissible-only
decoding; the final evaluation on the 234 held-out tasks x 1 sampled episode):

    none   ppo.rollout_correction.mode=none: not corrected; the mismatch is logged (mismatch/*)
    tis    ppo.rollout_correction.mode=tis, token level, cap C = 2

Per seed, d = success(tis) - success(none) on the same held-out tasks; the interval over seeds is
the t-interval of the paired differences (df = seeds - 1). Each run's per-iteration mismatch
(kl_mean, kl_max, ess, clipped_frac) and per-task final outcomes go to --out.

bf16 needs native bf16 multiplies (a GPU, or a CPU with AVX-512 BF16 / AMX): elsewhere the run is
refused in one line. Cost: a seed's run takes 4-6 CPU hours on 2 cores (docs/real_llm.md), so the
six runs are 24-36 CPU hours; on one GPU (policy.device=cuda) about 20-30 minutes a run, mostly
the HF engine's token-by-token decoding. Resumable: a finished run is skipped, an interrupted one
resumes from its last checkpoint (the preset checkpoints every 5 iterations).

    python benchmarks/learning/rollout_correction_smol.py --seeds 0,1,2 --out docs/rollout_correction_smol.json
    python benchmarks/learning/rollout_correction_smol.py --seeds 0,1,2 --out docs/rollout_correction_smol.json \\
        -- policy.device=cuda torch_threads=null
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARMS = {
    "none": ["ppo.rollout_correction.mode=none"],
    "tis": ["ppo.rollout_correction.mode=tis", "ppo.rollout_correction.level=token", "ppo.rollout_correction.cap=2.0"],
}
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
LOGGED = ("mismatch/kl_mean", "mismatch/kl_max", "mismatch/ess", "mismatch/clipped_frac", "mismatch/tokens",
          "train/ratio_max_first_minibatch", "train/clip_frac", "rollout/success_rate", "time/iteration_cpu_s")


def t_interval(values: list[float]) -> list[float] | None:
    """Mean +- t_{0.975, n-1} sd / sqrt(n): the 95% interval of a mean over seeds."""
    if len(values) < 2:
        return None
    mean, half = statistics.fmean(values), T975[len(values) - 1] * statistics.stdev(values) / math.sqrt(len(values))
    return [mean - half, mean + half]


def final_evaluation(run_dir: Path) -> dict[str, float]:
    """The final evaluation's success per held-out task (metrics.jsonl's eval/per_task_success/<id>)."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    last = [m for m in lines if "eval/success_rate" in m][-1]
    return {k.split("/", 2)[2]: v for k, v in last.items() if k.startswith("eval/per_task_success/")}


def per_iteration(run_dir: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [{k: m[k] for k in LOGGED if k in m} for m in lines if "rollout/success_rate" in m]


def summarize(record: dict, seeds: list[int]) -> dict:
    runs = record["runs"]
    out: dict = {arm: {"per_seed": [runs[f"{arm}/seed{s}"]["heldout_after"] for s in seeds if f"{arm}/seed{s}" in runs]}
                 for arm in ARMS}
    diffs = []
    for s in seeds:
        if f"tis/seed{s}" in runs and f"none/seed{s}" in runs:
            tis, none = runs[f"tis/seed{s}"]["per_task_success"], runs[f"none/seed{s}"]["per_task_success"]
            diffs.append(statistics.fmean(tis[t] - none[t] for t in tis))
    out["tis_minus_none"] = {"per_seed": diffs, "mean": statistics.fmean(diffs) if diffs else None,
                             "t_interval_95": t_interval(diffs)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/rollout_correction_smol.json")
    parser.add_argument("--work", default="runs/rollout_correction_smol")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--preset", default="household-smol")
    parser.add_argument("overrides", nargs="*",
                        help="config overrides for every run (key=value), e.g. policy.device=cuda")
    args = parser.parse_args()

    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import train

    seeds, arms = [int(s) for s in args.seeds.split(",")], args.arms.split(",")
    work, out = Path(args.work), Path(args.out)
    script = Path(__file__).resolve()
    root = script.parents[2]
    record = json.loads(out.read_text()) if out.is_file() else {}
    if record.get("command_args") not in (None, sys.argv[1:]):
        raise SystemExit(f"{out} holds another command's results: move it away or run with its arguments")
    record.setdefault("code_version", subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                                                     capture_output=True, text=True).stdout.strip())
    common = ["ppo.matmul_dtype=bf16", "log.plot=false", *args.overrides]
    record.update({"command": f"python {script.relative_to(root)} " + " ".join(sys.argv[1:]),
                   "command_args": sys.argv[1:],
                   "setup": {"preset": args.preset, "common_overrides": common, "arms": ARMS, "seeds": seeds}})
    record.setdefault("runs", {})
    for seed in seeds:
        for arm in arms:
            name, run_dir = f"{arm}/seed{seed}", work / arm / f"seed{seed}"
            if name in record["runs"]:
                continue
            c0, t0 = time.process_time(), time.perf_counter()
            cfg = load_config(args.preset, common + ARMS[arm] + [f"seed={seed}", f"name=smol-bf16-{arm}-s{seed}",
                                                                 f"run_dir={run_dir}"])
            summary = train(cfg, resume=True, overwrite=True)  # from its last checkpoint, if interrupted
            record["runs"][name] = {"heldout_before": summary["heldout_success_before"],
                                    "heldout_after": summary["heldout_success_after"],
                                    "heldout_gain_ci": summary["heldout_gain_ci"],
                                    "cpu_s_this_session": time.process_time() - c0, "wall_s": time.perf_counter() - t0,
                                    "load_1min": os.getloadavg()[0], "per_iteration": per_iteration(run_dir),
                                    "per_task_success": final_evaluation(run_dir)}
            record["summary"] = summarize(record, seeds)
            out.write_text(json.dumps(record, indent=1) + "\n")
            print(f"{name}: {summary['heldout_success_before']:.3f} -> {summary['heldout_success_after']:.3f}",
                  flush=True)
    print(json.dumps(record.get("summary"), indent=1), flush=True)


if __name__ == "__main__":
    main()
