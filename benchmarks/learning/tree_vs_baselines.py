"""Tree (branch-measured step values) against GiGPO and GRPO on household-tiny, at equal env steps.

The protocol, fixed before any run, is docs/tree_protocol.md: arms gigpo, grpo and tree; seeds 0-4;
every arm from the same warm start of its seed; the GiGPO arm runs the preset's iterations and its
env steps (branch episodes count for the tree arm) are the budget of the other two, whose
iteration counts are set from a pilot's steps per iteration (seed 100, never reported); the final
held-out evaluation of each run; per arm the mean over seeds with a t interval over seeds, and the
paired differences tree - gigpo and tree - grpo with their t intervals over seeds.

    python benchmarks/learning/tree_vs_baselines.py --pilot              # steps per iteration of each arm -> --out
    python benchmarks/learning/tree_vs_baselines.py                      # the five seeds, one run at a time
    python benchmarks/learning/tree_vs_baselines.py --seeds 0 --arms tree iterations=2   # any config override

Writes --out (default docs/tree_vs_baselines.json): the pilot, then per arm and seed the final
held-out success (and per task), env steps, trained tokens, iterations and wall time, and the summary.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import code_version, command  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ARMS = {  # overrides of the household-tiny preset per arm
    "gigpo": [],
    "grpo": ["estimator.name=grpo"],
    # branch points every 3rd step, 2 branches each: about 6x the env steps of a root episode
    "tree": ["estimator.name=tree", "estimator.options.k=2", "estimator.options.every=3"],
}
SEEDS = [0, 1, 2, 3, 4]
PILOT_SEED, PILOT_ITERATIONS = 100, 3


def run_totals(run_dir: Path) -> dict:
    """Env steps, trained tokens and iterations of a finished run, from its metrics.jsonl."""
    from agentgym.trainers.logging_utils import read_metrics

    rows = [r for r in read_metrics(run_dir) if "rollout/episodes" in r]
    return {"env_steps": int(round(sum(r["rollout/episodes"] * r["rollout/mean_steps"] for r in rows))),
            "trained_tokens": int(sum(r.get("train/tokens", 0) for r in rows)), "iterations": len(rows)}


def train_arm(arm: str, seed: int, runs: Path, overrides: list[str]) -> dict:
    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import train

    run_dir = runs / f"{arm}_seed{seed}"
    cfg = load_config("household-tiny", [f"seed={seed}", f"run_dir={run_dir}", "torch_threads=1",
                                         *ARMS[arm], *overrides])
    summary = train(cfg, log=lambda line: print(f"[{arm} seed {seed}] {line}", flush=True))
    state = json.loads(sorted((run_dir / "checkpoints").glob("iter_*/state.json"))[-1].read_text())
    return {"arm": arm, "seed": seed, "before": summary["heldout_success_before"],
            "after": summary["heldout_success_after"], "per_task_after": state["evals"][-1]["per_task_success"],
            "wall_s": summary["wall_seconds"], **run_totals(run_dir)}


# Student t's 0.975 quantile by degrees of freedom (seeds - 1); the protocol has at most 9.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(values: list[float]) -> list[float]:
    """95%: mean +- t quantile x standard error over seeds (the spread of training, not of evaluation)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return [mean, mean]
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = T975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return [mean - half, mean + half]


def summarize(records: list[dict]) -> dict:
    by = {(r["arm"], r["seed"]): r for r in records}
    arms = sorted({r["arm"] for r in records})
    seeds = sorted({r["seed"] for r in records})
    out = {"arms": {}, "differences": {}}
    for arm in arms:
        finals = [by[arm, s]["after"] for s in seeds if (arm, s) in by]
        out["arms"][arm] = {"seeds": len(finals), "mean": sum(finals) / len(finals), "interval": t_interval(finals),
                            "env_steps": [by[arm, s]["env_steps"] for s in seeds if (arm, s) in by],
                            "trained_tokens": [by[arm, s]["trained_tokens"] for s in seeds if (arm, s) in by]}
    for other in ("gigpo", "grpo"):
        diffs = [by["tree", s]["after"] - by[other, s]["after"] for s in seeds if ("tree", s) in by and (other, s) in by]
        if diffs:
            out["differences"][f"tree-{other}"] = {"mean": sum(diffs) / len(diffs), "interval": t_interval(diffs),
                                                   "seeds": len(diffs)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--pilot", action="store_true", help="measure each arm's env steps per iteration (seed 100)")
    ap.add_argument("--runs", default="runs/tree_vs_baselines", help="run folders go here")
    ap.add_argument("--out", default=str(ROOT / "docs" / "tree_vs_baselines.json"))
    ap.add_argument("overrides", nargs="*", help="config overrides for every arm, e.g. iterations=2")
    args = ap.parse_args()
    out_path, runs = Path(args.out), Path(args.runs)
    data = json.loads(out_path.read_text()) if out_path.exists() else {}
    version = code_version()
    data.update(protocol="docs/tree_protocol.md", code_version=version)
    if args.pilot:
        pilot = {}
        for arm in args.arms:
            r = train_arm(arm, PILOT_SEED, runs / "pilot", [f"iterations={PILOT_ITERATIONS}", *args.overrides])
            pilot[arm] = {"steps_per_iteration": r["env_steps"] / r["iterations"],
                          "tokens_per_iteration": r["trained_tokens"] / r["iterations"]}
        data["pilot"] = {"seed": PILOT_SEED, "iterations": PILOT_ITERATIONS, "arms": pilot}
        data["pilot_command"] = command(__file__, sys.argv[1:])
        out_path.write_text(json.dumps(data, indent=2) + "\n")
        return
    if "pilot" not in data:
        raise SystemExit(f"no pilot in {out_path}: run with --pilot first (it sets the arms' iterations)")
    from agentgym.trainers.config import load_config

    base = load_config("household-tiny", []).iterations
    per_iter = {arm: v["steps_per_iteration"] for arm, v in data["pilot"]["arms"].items()}
    records = [r for r in data.get("records", []) if (r["arm"], r["seed"]) not in
               {(a, s) for a in args.arms for s in args.seeds}]
    for seed in args.seeds:
        for arm in args.arms:
            # the GiGPO arm's budget, in env steps, spread over as many of this arm's iterations as it buys
            iterations = max(1, round(base * per_iter["gigpo"] / per_iter[arm]))
            records.append(train_arm(arm, seed, runs, [f"iterations={iterations}", *args.overrides]))
            data["records"] = records
            data["summary"] = summarize(records)
            data["command"] = command(__file__, sys.argv[1:])
            out_path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
