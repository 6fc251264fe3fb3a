"""benchmarks/learning/sft_then_rl.py (docs/sft_then_rl_protocol.md): the jobs wait for what they
need, the SFT phase gets half of its seed's GiGPO steps in the sft arm's batches, and the report
pairs the arm with the verdict's own sft and gigpo runs of each seed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.learning import sft_then_rl as str_  # noqa: E402
from benchmarks.learning import verdict  # noqa: E402


def make_args(tmp_path: Path, seeds=(0, 1, 2)) -> argparse.Namespace:
    return argparse.Namespace(setting="tiny", preset="household-tiny", overrides=[], seeds=list(seeds),
                              grid=[3e-5, 1e-4], grids=dict(verdict.SETTINGS["tiny"].grids), tune_seed=100,
                              ceiling=False, val_tasks=100, runs=str(tmp_path / "runs"),
                              verdict_runs=str(tmp_path / "verdict_runs"), verdict_json=str(tmp_path / "verdict.json"),
                              out=str(tmp_path / "out.json"))


def run(success: dict[str, float], before: float = 0.25, steps: int = 100, tokens: int = 1000) -> dict:
    return {"heldout": {"success_rate": sum(success.values()) / len(success), "per_task_success": success},
            "heldout_before": {"success_rate": before, "per_task_success": {t: before for t in success}},
            "compute": {"optimizer_steps": steps, "tokens": tokens, "rollout_episodes": 2880}, "lr": 1e-4,
            "iterations": 60}


def write_verdict(args, seeds) -> None:
    jobs = {}
    for seed in seeds:
        jobs[f"gigpo/seed{seed}"] = run({"t1": 0.5, "t2": 0.5})
        jobs[f"sft/seed{seed}"] = run({"t1": 0.75, "t2": 0.5 + 0.25 * (seed == 0)})
    jobs["tune/gigpo/lr0.0001"] = run({"t1": 0.5}, steps=90, tokens=900)
    Path(args.verdict_json).write_text(json.dumps({"tiny": {"overrides": verdict.job_overrides(args), "jobs": jobs,
                                                            "lr_choice": {"chosen": {"sft": 1e-3, "gigpo": 1e-4}}}}))


def test_each_rl_phase_waits_for_its_sft_phase_and_for_every_tuning_run(tmp_path):
    args = make_args(tmp_path, seeds=(0, 1))
    graph = {job.key: job.after for job in str_.jobs(args)}
    tunes = ("tune/then_gigpo/lr3e-05", "tune/then_gigpo/lr0.0001")
    assert graph["sft_half/seed100"] == ("warm/seed100",)
    assert all(graph[key] == ("sft_half/seed100",) for key in tunes)
    assert graph["then_gigpo/seed1"] == ("sft_half/seed1", *tunes)
    assert graph["sft_half/seed1"] == ("warm/seed1",)
    assert list(graph).index("tune/then_gigpo/lr0.0001") < list(graph).index("warm/seed0")  # tuning first


def test_the_sft_phase_is_half_the_gigpo_steps_at_its_tokens_per_step():
    half = str_.half_budget({"optimizer_steps": 247, "tokens": 2_413_865})
    assert half["optimizer_steps"] == 123
    assert half["tokens"] / half["optimizer_steps"] == pytest.approx(2_413_865 / 247)  # the sft arm's batches
    with pytest.raises(SystemExit, match="nothing to halve"):
        str_.half_budget({"optimizer_steps": 1, "tokens": 10})


def test_the_seed_100_sft_phase_halves_the_verdicts_tuning_run_at_its_chosen_rate(tmp_path):
    args = make_args(tmp_path)
    write_verdict(args, args.seeds)
    rates = str_.chosen_rates(str_.verdict_runs.verdict_results(args)[0])
    assert str_.gigpo_run(rates, 100) == "tune/gigpo/lr0.0001" and str_.gigpo_run(rates, 2) == "gigpo/seed2"
    Path(args.verdict_json).write_text(json.dumps({"tiny": {"lr_choice": {"chosen": {"gigpo": 1e-4}}}}))
    with pytest.raises(SystemExit, match="has not chosen"):
        str_.chosen_rates(str_.verdict_runs.verdict_results(args)[0])


def test_the_report_pairs_the_arm_with_the_verdicts_sft_and_gigpo_of_each_seed(tmp_path):
    args = make_args(tmp_path)
    write_verdict(args, args.seeds)
    table = rr.DoneTable(Path(args.runs) / "done.json")
    for lr, score in ((3e-5, 0.4), (1e-4, 0.6)):
        table.mark(rr.tune_key("then_gigpo", lr), {"validation": {"success_rate": score}, "code_version": "abc"})
    for seed in args.seeds:
        table.mark(f"sft_half/seed{seed}", {"compute": {"optimizer_steps": 50, "tokens": 500, "rollout_episodes": 0},
                                            "model": "m", "code_version": "abc"})
        # the RL phase: 0.5 after half SFT, then 0.75 on both tasks; seed 2 trained 30% too many tokens
        table.mark(f"then_gigpo/seed{seed}", {**run({"t1": 0.75, "t2": 0.75}, before=0.5, steps=50,
                                                     tokens=800 if seed == 2 else 500), "code_version": "abc"})
    out = str_.report(args, table)
    assert out["lr_choice"] == {"sft_phase": 1e-3, "rl_phase_grid": {"3e-05": 0.4, "0.0001": 0.6}, "rl_phase": 1e-4}
    primary = out["primary"]
    assert primary["comparison"] == "sft_then_gigpo - sft" and primary["seeds"] == [0, 1, 2]
    assert primary["per_seed"] == [0.0, 0.125, 0.125]  # the verdict's sft: (0.75, 0.75) on seed 0, (0.75, 0.5) after
    assert out["secondary"]["per_seed"] == [0.25, 0.25, 0.25]
    assert out["rl_phase_gain"]["per_seed"] == [0.25, 0.25, 0.25]  # over the half-SFT model (its "before")
    rows = {row["seed"]: row for row in out["seed_rows"]}
    assert rows[0]["half_sft"] == 0.5 and rows[0]["sft"] == 0.75 and rows[0]["gigpo"] == 0.5
    assert rows[0]["compute"]["total"]["optimizer_steps"] == 100 and not rows[0]["compute"]["over_tolerance"]
    assert rows[2]["compute"]["total_vs_gigpo"]["tokens"] == pytest.approx(0.3) and rows[2]["compute"]["over_tolerance"]
    assert out["sentence"].startswith(("SFT then RL beats", "no difference"))
    assert set(out["jobs"]) == {k for k in table.done}


def test_an_sft_phase_whose_model_is_gone_runs_again_when_its_rl_phase_is_pending(tmp_path):
    args = make_args(tmp_path, seeds=(0, 1))
    model = tmp_path / "runs" / "sft_half" / "seed0" / "model"
    recorded = {"sft_half/seed0": {"model": "RUNS/sft_half/seed0/model", "compute": {}},
                "sft_half/seed1": {"model": "RUNS/sft_half/seed1/model", "compute": {}},
                "then_gigpo/seed1": {"heldout": {}}}
    Path(args.out).write_text(json.dumps({"jobs": recorded}))
    model.mkdir(parents=True)
    str_.restore(args, Path(args.runs))
    table = rr.DoneTable(Path(args.runs) / "done.json")
    assert "sft_half/seed0" in table  # its model is here
    assert "sft_half/seed1" in table  # gone, but its RL phase is done: nothing needs it
    assert table["sft_half/seed0"]["model"] == str(model.resolve())
    recorded.pop("then_gigpo/seed1")
    Path(args.out).write_text(json.dumps({"jobs": recorded}))
    (Path(args.runs) / "done.json").unlink()
    str_.restore(args, Path(args.runs))
    assert "sft_half/seed1" not in rr.DoneTable(Path(args.runs) / "done.json")
