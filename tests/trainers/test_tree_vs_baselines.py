"""benchmarks/learning/tree_vs_baselines.py (docs/tree_protocol.md, amendment of 2026-11-29): the
warm starts and the GiGPO arm are read from the verdict experiment, GRPO is reused only at the
preset's rate, and the report pairs each seed's tree run with the verdict's runs of that seed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.learning import tree_vs_baselines as tvb  # noqa: E402
from benchmarks.learning import verdict  # noqa: E402


def make_args(tmp_path: Path, **kw) -> argparse.Namespace:
    args = argparse.Namespace(seeds=[0, 1, 2], pilot=False, overrides=[], runs=str(tmp_path / "runs"),
                              verdict_runs=str(tmp_path / "verdict"), verdict_json=str(tmp_path / "verdict.json"),
                              out=str(tmp_path / "out.json"), setting="tiny", preset="household-tiny",
                              grids=dict(verdict.SETTINGS["tiny"].grids))
    vars(args).update(kw)
    return args


def record(success: dict[str, float], lr: float = 1e-4, steps: int = 1000, tokens: int = 5000) -> dict:
    rate = sum(success.values()) / len(success)
    return {"lr": lr, "iterations": 60, "heldout": {"success_rate": rate, "per_task_success": success},
            "heldout_before": {"success_rate": 0.5}, "heldout_unseen": {"success_rate": 0.4},
            "compute": {"tokens": tokens}, "env_steps": steps, "cpu_seconds": 1.0}


def write_verdict(args, jobs: dict, chosen: dict) -> None:
    Path(args.verdict_json).write_text(json.dumps({"tiny": {
        "overrides": verdict.COMMON, "lr_choice": {"chosen": chosen},
        "jobs": {k: verdict.portable(v, Path(args.verdict_runs)) for k, v in jobs.items()}}}))


def test_grpo_runs_here_only_when_the_verdict_chose_another_rate_than_the_presets(tmp_path):
    args = make_args(tmp_path)
    write_verdict(args, {}, {"gigpo": 1e-4})  # GRPO's tuning not chosen yet
    whole, records = tvb.verdict_results(args)
    assert tvb.own_arms(tvb.baseline_sources(args, whole, records)) == ["tree"]  # grpo waits
    write_verdict(args, {}, {"gigpo": 1e-4, "grpo": 1e-4})
    assert tvb.own_arms(tvb.baseline_sources(args, *tvb.verdict_results(args))) == ["tree"]  # the verdict's runs
    write_verdict(args, {}, {"gigpo": 1e-4})  # the choice is made in the jobs folder, not yet in the file
    table = rr.DoneTable(Path(args.verdict_runs) / "done.json")
    for lr, score in zip(args.grids["grpo"], (0.55, 0.43, 0.31)):
        table.mark(rr.tune_key("grpo", lr), {"validation": {"success_rate": score}})
    sources = tvb.baseline_sources(args, *tvb.verdict_results(args))
    assert sources["grpo"] == {"verdict_lr": 3e-5, "preset_lr": 1e-4, "source": "here"}
    own = tvb.own_arms(sources)
    assert own == ["tree", "grpo"]
    after = {j.key: set(j.after) for j in tvb.jobs(args, own)}
    pilot = {"pilot/gigpo", "pilot/grpo", "pilot/tree"}
    assert after["tree/seed2"] == after["grpo/seed2"] == {"warm/seed2"} | pilot  # the pilot sets their iterations
    assert after["pilot/tree"] == {"warm/seed100"} and "gigpo/seed0" not in after  # GiGPO is the verdict's
    args.pilot = True
    assert set(j.key for j in tvb.jobs(args, own)) == {"warm/seed100"} | pilot


def test_the_report_pairs_tree_with_the_verdicts_runs_of_each_seed_and_lists_what_is_pending(tmp_path):
    args = make_args(tmp_path)
    write_verdict(args, {"gigpo/seed0": record({"a": 0.5, "b": 0.5}),
                         "gigpo/seed1": record({"a": 0.25, "b": 0.75}),
                         "gigpo/seed2": record({"a": 1.0, "b": 1.0}, lr=3e-4)},  # another rate: not this arm
                  {"gigpo": 1e-4, "grpo": 3e-5})
    for seed in (0, 1):  # the verdict's records carry no env steps: its runs' metrics do
        folder = Path(args.verdict_runs) / f"gigpo/seed{seed}"
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "rollout/episodes": 100,
                                                          "rollout/mean_steps": 10.0}) + "\n")
    table = rr.DoneTable(Path(args.runs) / "done.json")
    for arm, steps in (("gigpo", 480), ("grpo", 480), ("tree", 2880)):
        table.mark(f"pilot/{arm}", {**record({"a": 0.0}, steps=steps), "iterations": 3})
    table.mark("tree/seed0", record({"a": 0.75, "b": 0.75}, steps=1050))
    table.mark("tree/seed1", record({"a": 0.5, "b": 1.0}, steps=1500))  # 50% more env steps than GiGPO's
    out = tvb.report(args, table)
    assert out["pilot"]["planned_iterations"] == {"gigpo": 60, "grpo": 60, "tree": 10}
    primary = out["primary"]
    assert primary["seeds"] == [0, 1] and primary["per_seed"] == pytest.approx([0.25, 0.25])
    assert primary["interval_over_seeds"] == pytest.approx([0.25, 0.25])
    assert out["runs"]["gigpo"]["0"]["source"] == "docs/verdict.json tiny.jobs gigpo/seed0"
    assert out["runs"]["gigpo"]["0"]["env_steps"] == 1000
    assert "mean" not in out["secondary"]  # no GRPO run at the preset's rate yet
    assert any(p.startswith("gigpo/seed2: the verdict's run has rate 0.0003") for p in out["pending"])
    assert {"tree/seed2: not run yet", "grpo/seed0: not run yet"} <= set(out["pending"])
    flagged = {b["run"]: b["over_tolerance"] for b in out["budget"]}
    assert flagged == {"tree/seed0": False, "tree/seed1": True}
    assert set(out["jobs"]) == {"pilot/gigpo", "pilot/grpo", "pilot/tree", "tree/seed0", "tree/seed1"}


def test_a_missing_warm_model_is_rebuilt_here_and_a_present_one_is_the_verdicts(tmp_path, capsys):
    args = make_args(tmp_path, seeds=[0, 1])
    built = Path(args.verdict_runs) / "warm/seed0"
    gone = Path(args.verdict_runs) / "warm/seed1"
    write_verdict(args, {"warm/seed0": {"model": str(built / "sft_model")},
                         "warm/seed1": {"model": str(gone / "sft_model")}}, {"gigpo": 1e-4})
    (built / "sft_model").mkdir(parents=True)  # no settings record: nothing to contradict
    table = rr.DoneTable(Path(args.runs) / "done.json")
    tvb.adopt_warm_starts(args, table, tvb.verdict_results(args)[1], tvb.jobs(args, ["tree"]))
    assert table["warm/seed0"]["source"] == "verdict warm/seed0" and "warm/seed1" not in table
    assert "warm/seed1: the verdict's warm model" in capsys.readouterr().out


def test_verdict_runs_made_with_other_overrides_are_refused_in_one_line(tmp_path):
    args = make_args(tmp_path, overrides=["iterations=2"])
    write_verdict(args, {}, {})
    with pytest.raises(SystemExit, match="give the verdict's own overrides after --"):
        tvb.check_verdict_settings(args, tvb.verdict_results(args)[0])
    with pytest.raises(SystemExit, match="no verdict experiment"):
        tvb.check_verdict_settings(make_args(tmp_path / "none"), {})


def test_the_pilots_gigpo_run_is_checked_against_the_verdicts_tuning_run(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "verdict" / "tune/gigpo/lr0.0001"

    def metrics(folder: Path, loss_2: float, iterations: int) -> None:
        folder.mkdir(parents=True)
        rows = [{"step": i, "iteration": i, "rollout/episodes": 48, "rollout/mean_steps": 11.0,
                 "time/rollout_s": i * 3.1, "train/pg_loss": loss_2 if i == 2 else 0.1}
                for i in range(1, iterations + 1)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    metrics(ours, 0.2, 3)
    metrics(theirs, 0.2, 60)  # the same first iterations; wall times always differ
    check = tvb.same_iterations(ours, tmp_path / "verdict", "tune/gigpo/lr0.0001")
    assert check["equal"] and check["iterations"] == [1, 2, 3] and check["compared"] == 12
    (ours / "metrics.jsonl").unlink()
    ours.rmdir()
    metrics(ours, 0.3, 3)
    check = tvb.same_iterations(ours, tmp_path / "verdict", "tune/gigpo/lr0.0001")
    assert not check["equal"] and check["differences"] == ["iteration 2 train/pg_loss: 0.3 here, 0.2 there"]
    assert tvb.env_steps(ours) == 3 * 48 * 11
