"""Draws docs/scaling.png, the architecture picture of docs/scaling.md.

Usage: python benchmarks/speed/scaling_figure.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402


def box(ax, x, y, w, h, text, color, fontsize=9, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=color, ec="#333333",
                                lw=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight, wrap=True)


def arrow(ax, x0, y0, x1, y1, text="", color="#333333", style="-|>", offset=(0, 0.12), both=False):
    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="<|-|>" if both else style, mutation_scale=12,
                                 color=color, lw=1.2))
    if text:
        ax.text((x0 + x1) / 2 + offset[0], (y0 + y1) / 2 + offset[1], text, ha="center", va="bottom", fontsize=7.5,
                color=color)


def main(out: Path) -> None:
    fig, ax = plt.subplots(figsize=(13, 6.6))
    ax.set_xlim(0, 13)
    ax.set_ylim(0, 6.6)
    ax.axis("off")

    # trainer ranks (torchrun)
    ax.add_patch(FancyBboxPatch((0.2, 3.05), 5.3, 3.35, boxstyle="round,pad=0.02", fc="#f4f6fb", ec="#5b6b8c", ls="--"))
    ax.text(0.35, 6.2, "trainer: torchrun, one process per rank", fontsize=9, weight="bold", color="#2d3a56")
    for i, (label, extra) in enumerate((("rank 0", "+ eval, logs,\ncheckpoints"),
                                        ("rank 1", ""), ("rank N-1", ""))):
        x = 0.4 + i * 1.7
        box(ax, x, 3.65, 1.55, 2.3, f"{label}\n\ntask block\n(whole groups)\n\nadvantages\n(group-local)\n\n"
            f"PPO update\n{extra}", "#dde6f7", fontsize=7.5)
    arrow(ax, 1.95, 3.9, 2.1, 3.9, both=True)
    arrow(ax, 3.65, 3.9, 3.8, 3.9, both=True)
    ax.text(2.85, 3.2, "gradient all-reduce per optimizer step\n(gloo on CPU, nccl on CUDA)",
            ha="center", fontsize=7.5, color="#2d3a56")

    # Ray cluster
    ax.add_patch(FancyBboxPatch((7.0, 0.25), 5.8, 6.15, boxstyle="round,pad=0.02", fc="#f7f5ee", ec="#8c7b4d", ls="--"))
    ax.text(7.15, 6.2, "Ray cluster: local ray.init(), or ray.address=auto (`ray start --head`)", fontsize=9,
            weight="bold", color="#5a4a1f")
    ax.text(7.2, 5.75, "env workers: Ray actors (executor=\"ray\"), max_restarts=-1", fontsize=8.5, color="#5a4a1f")
    for i in range(3):
        x = 7.2 + i * 1.85
        name = f"env worker {i if i < 2 else 'W-1'}"
        box(ax, x, 4.0, 1.7, 1.55, f"{name}\n(num_cpus_per_worker)\n\nChatEnv slots\nslot s on worker s % W\n"
            "(envs_per_worker cap)", "#f3e6c4", fontsize=7.2)
    ax.text(7.2, 3.55, "rollout policy replicas: Ray actors (policy.engine=ray)", fontsize=8.5, color="#5a4a1f")
    for i in range(2):
        x = 7.2 + i * 2.8
        box(ax, x, 1.9, 2.55, 1.45, f"policy replica {i if i == 0 else 'R-1'}\nHFPolicy (CPU / 1 GPU)\nor vLLM on GPUs\n"
            "batch chunk i, seed + i", "#e4f1dc", fontsize=7.5)
    ax.text(7.2, 1.25, "a killed env worker: its slots' episodes end infra_error, Ray restarts the\nprocess, "
            "the rollout goes on; a silent one is killed after ray.step_timeout_s", fontsize=7.5, color="#5a4a1f")

    # flows
    arrow(ax, 5.5, 5.0, 7.2, 4.8, "reset / step\none call per\nworker per turn", color="#7a5c12", offset=(0, 0.12))
    arrow(ax, 5.5, 4.2, 7.2, 2.9, "prompts ->\ncompletions", color="#2f6b2f", offset=(0.15, -0.05))
    arrow(ax, 1.2, 3.05, 7.2, 2.2, "", color="#2f6b2f")
    ax.text(1.6, 2.2, "weight sync after each update:\nchanged trainable params -> object store ->\nevery replica "
            "(LoRA: adapter only)", fontsize=7.5, color="#2f6b2f")

    # CLI
    box(ax, 0.3, 0.35, 5.2, 1.45, "agentgym train CONFIG env.executor=ray policy.engine=ray ray.address=auto\n"
        "agentgym train CONFIG --nproc 2      (= torchrun --standalone --nproc-per-node 2\n"
        "                                        -m agentgym.trainers.cli train CONFIG)\n"
        "agentgym.collect(env, tasks, policy, G, executor=\"ray\", executor_options={...})",
        "#ffffff", fontsize=7.5)
    ax.texts[-1].set_ha("left")
    ax.texts[-1].set_x(0.45)
    fig.savefig(out, dpi=130, bbox_inches="tight")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[2] / "docs" / "scaling.png")
