"""Credit assignment on household: GRPO, RLOO, LOOP, PPO, GiGPO and SPA from the same warm start.

One warm start (the household-tiny preset's tiny model + SFT) is built once; every estimator
then trains from it with the same rollout budget (tasks x group size x iterations) and the
same seeds, and is evaluated on the same held-out tasks. Printed: held-out success mean +- std
over seeds after training, and the first evaluated iteration at which held-out success
reached the target (70% by default; "-" if never). Also writes results.json and
learning_curves.png into the output folder.

    python benchmarks/credit_assignment.py --quick          # 2 seeds, few iterations
    python benchmarks/credit_assignment.py --seeds 3 --iterations 12
    python benchmarks/credit_assignment.py --quick --warm-start runs/household-tiny/sft_model
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ESTIMATORS = ("grpo", "rloo", "loop", "ppo", "gigpo", "spa")
# What makes each method itself, beyond the advantage (from ALGORITHMS.md): LOOP trains several
# epochs over its rollouts with an asymmetric clip; the others one epoch. GRPO divides by the
# group's std (the preset turns that off for GiGPO; without it GRPO is RLOO times a constant,
# which Adam undoes, and the two train identically).
PER_ESTIMATOR = {"loop": ["ppo.epochs=2", "ppo.asymmetric_clip=true", "estimator.norm_std=false"],
                 "rloo": ["estimator.norm_std=false"], "grpo": ["estimator.norm_std=true"]}


def warm_start(out: Path, overrides: list[str]) -> Path:
    from agentgym.trainers.config import load_config
    from agentgym.trainers.loop import prepare_start_model, _quiet_transformers

    _quiet_transformers()
    cfg = load_config("household-tiny", [f"run_dir={out / 'warm_start'}", *overrides])
    import torch

    torch.set_num_threads(cfg.torch_threads or torch.get_num_threads())
    (out / "warm_start").mkdir(parents=True, exist_ok=True)
    model_dir, _ = prepare_start_model(cfg, out / "warm_start", log=lambda s: print(s, flush=True))
    return model_dir


def run_one(out: Path, model_dir: Path, estimator: str, seed: int, iterations: int, eval_every: int,
            overrides: list[str]) -> dict:
    from agentgym.trainers.config import load_config
    from agentgym.trainers.loop import train

    run_dir = out / f"{estimator}_seed{seed}"
    cfg = load_config("household-tiny", [
        f"policy.model={model_dir}", "tiny.build=false", "sft.enabled=false", f"estimator.name={estimator}",
        f"seed={seed}", f"run_dir={run_dir}", f"iterations={iterations}", f"eval.every={eval_every}",
        "time_budget_s=null", "checkpoint_every=0", *PER_ESTIMATOR.get(estimator, []), *overrides,
    ])
    t0 = time.perf_counter()
    summary = train(cfg, log=lambda s: None)
    summary["seconds"] = time.perf_counter() - t0
    return summary


def first_reaching(evals: list[dict], target: float):
    for e in evals:
        if e["success_rate"] >= target:
            return e["iteration"]
    return None


def report(results: dict, target: float, out: Path) -> str:
    import numpy as np

    lines = ["| estimator | held-out success (mean ± std) | iterations to reach {:.0f}% | seeds |".format(100 * target),
             "| --- | --- | --- | --- |"]
    for est, runs in results.items():
        final = np.array([r["heldout_success_after"] for r in runs])
        reach = [first_reaching(r["evals"], target) for r in runs]
        reached = [x for x in reach if x is not None]
        reach_text = (f"{np.mean(reached):.1f} ({len(reached)}/{len(runs)} seeds)" if reached else "-")
        lines.append(f"| {est} | {final.mean():.3f} ± {final.std(ddof=1) if len(final) > 1 else 0.0:.3f} | "
                     f"{reach_text} | {len(runs)} |")
    table = "\n".join(lines)
    (out / "results.md").write_text(table + "\n")
    return table


def plot(results: dict, out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for est, runs in results.items():
        its = sorted({e["iteration"] for r in runs for e in r["evals"]})
        curves = [[next((e["success_rate"] for e in r["evals"] if e["iteration"] == i), np.nan) for i in its]
                  for r in runs]
        mean, std = np.nanmean(curves, axis=0), np.nanstd(curves, axis=0)
        ax.plot(its, mean, marker="o", label=est)
        ax.fill_between(its, mean - std, mean + std, alpha=0.15)
    ax.set_xlabel("RL iteration")
    ax.set_ylabel("held-out success (sampled, T=1)")
    ax.set_title("household (easy pick/look), same warm start and rollout budget")
    ax.grid(alpha=0.3)
    ax.legend()
    path = out / "learning_curves.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 6 iterations, eval every 3")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--target", type=float, default=0.7)
    ap.add_argument("--out", default="runs/credit_assignment")
    ap.add_argument("--warm-start", default=None,
                    help="an SFT'd model folder to start from (e.g. runs/household-tiny/sft_model); default: build one")
    ap.add_argument("overrides", nargs="*", help="config overrides for every run, e.g. rollout.group_size=4")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.iterations, args.eval_every = min(args.seeds, 2), 6, 3
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model_dir = Path(args.warm_start) if args.warm_start else warm_start(out, args.overrides)
    print(f"warm start: {model_dir} ({time.perf_counter() - t0:.0f}s)", flush=True)
    results: dict[str, list[dict]] = {}
    results_path = out / "results.json"
    for est in args.estimators.split(","):
        for seed in range(args.seeds):
            summary = run_one(out, model_dir, est, seed, args.iterations, args.eval_every, args.overrides)
            results.setdefault(est, []).append(summary)
            print(f"{est} seed {seed}: held-out {summary['heldout_success_before']:.3f} -> "
                  f"{summary['heldout_success_after']:.3f} ({summary['seconds']:.0f}s)", flush=True)
            results_path.write_text(json.dumps(results, indent=1, default=float))
    print()
    print(report(results, args.target, out))
    png = plot(results, out)
    print(f"\nplot: {png}; raw: {results_path}; total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
