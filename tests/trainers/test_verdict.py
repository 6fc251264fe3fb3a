"""benchmarks/learning/verdict.py: each setting's own overrides (docs/verdict.md, amendment of
2026-11-29) reach every job's config, between the common ones and the user's; the report compares
every arm with the primary baseline, the better imitation arm."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.learning import verdict  # noqa: E402


def args_for(setting: str, overrides: list[str]) -> argparse.Namespace:
    return argparse.Namespace(setting=setting, preset=verdict.SETTINGS[setting].preset, overrides=overrides)


def test_smol_jobs_decode_on_the_pool_engine_and_tiny_jobs_are_unchanged(tmp_path):
    smol = verdict.config(args_for("smol", []), 3, tmp_path)
    assert smol.policy.engine == "pool" and smol.seed == 3 and smol.checkpoint_every == 5
    assert verdict.job_overrides(args_for("tiny", [])) == verdict.COMMON  # the runs already made are the same jobs
    assert verdict.config(args_for("tiny", []), 0, tmp_path).policy.engine == "hf"


def test_the_users_overrides_come_after_the_settings():
    overrides = verdict.job_overrides(args_for("smol", ["policy.engine=hf", "policy.device=cuda"]))
    assert overrides.index("policy.engine=pool") < overrides.index("policy.engine=hf")
    assert overrides[:len(verdict.COMMON)] == verdict.COMMON and overrides[-1] == "policy.device=cuda"


def finished(arm: str, seed: int, success: dict[str, float]) -> dict:
    rate = sum(success.values()) / len(success)
    return {"arm": arm, "seed": seed, "lr": 1e-4, "heldout": {"success_rate": rate, "per_task_success": success},
            "heldout_before": {"success_rate": 0.25, "per_task_success": {t: 0.25 for t in success}},
            "heldout_unseen": {"success_rate": rate}, "compute": {"optimizer_steps": 4, "tokens": 100}}


def test_every_arm_is_compared_with_the_better_imitation_arm_over_seeds(tmp_path):
    args = argparse.Namespace(setting="tiny", preset="household-tiny", overrides=[], seeds=[0, 1, 2], tune_seed=100,
                              grids=dict(verdict.SETTINGS["tiny"].grids), arms=list(verdict.ARMS), ceiling=True,
                              val_tasks=100, runs=str(tmp_path))
    table = rr.DoneTable(tmp_path / "done.json")
    success = {"gigpo": (0.5, 0.75), "grpo": (0.5, 0.5), "rft": (0.25, 0.5), "sft": (0.75, 0.75)}
    for arm, (a, b) in success.items():
        for seed in args.seeds:
            table.mark(f"{arm}/seed{seed}", finished(arm, seed, {"t1": a, "t2": b if seed else a}))
    out = verdict.report(args, table)
    assert out["primary"]["comparison"] == "gigpo - best imitation arm (sft)"
    against = {arm: out["arms"][arm]["minus_best_imitation"] for arm in verdict.ARMS}
    assert against["sft"]["mean"] == 0.0 and against["sft"]["per_seed"] == [0.0, 0.0, 0.0]
    assert against["gigpo"]["per_seed"] == [-0.25, -0.125, -0.125]  # seed 0 plays (a, a)
    primary = out["primary"]
    assert against["gigpo"]["mean"] == primary["mean"] and against["gigpo"]["seed_ci"] == primary["seed_ci"]
    assert against["rft"]["mean"] < against["grpo"]["mean"] < 0
    assert out["arms"]["gigpo"]["mean_before"] == 0.25


def test_an_rl_jobs_training_cpu_is_summed_from_its_metrics_and_kept_when_the_metrics_are_gone(tmp_path):
    """A resumed job's process CPU (`cpu_seconds`) misses its earlier processes; the trainer's per-iteration
    CPU, the last log of each iteration (a resumed iteration logs again), covers every iteration."""
    import json

    folder = tmp_path / "gigpo" / "seed0"
    folder.mkdir(parents=True)
    logs = [(1, 200.0), (2, 210.0), (2, 190.0), (3, 205.5)]  # iteration 2 ran twice: its last log counts
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"iteration": i, "time/iteration_cpu_s": cpu}) + "\n"
                                                 for i, cpu in logs))
    record = {**finished("gigpo", 0, {"t1": 1.0}), "cpu_seconds": 80.7}
    timed = verdict.with_training_cpu("gigpo/seed0", record, tmp_path)
    assert timed["training_cpu_seconds"] == 595.5 and timed["iterations_timed"] == 3
    assert timed["cpu_seconds"] == 80.7  # the process figure is kept beside it
    # on a machine without the job's folder (restored from the committed file), the recorded figure stays
    assert verdict.with_training_cpu("gigpo/seed0", timed, tmp_path / "elsewhere") == timed
    (tmp_path / "sft" / "seed0").mkdir(parents=True)  # an imitation arm's folder: not the RL trainer's iterations
    (tmp_path / "sft" / "seed0" / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "time/iteration_cpu_s": 9}))
    sft = finished("sft", 0, {"t1": 1.0})
    assert "training_cpu_seconds" not in verdict.with_training_cpu("sft/seed0", sft, tmp_path)
