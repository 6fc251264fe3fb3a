"""eval.before=false (verl's trainer.val_before_train=False): RL starts without evaluating the start
model; the summary then holds the final evaluation alone and says there is no gain to report."""

import json

from agentgym.trainers.training import heldout_change, train


def test_without_the_evaluation_before_the_summary_has_the_final_one_alone(toy_config, tmp_path, tiny_model_dir):
    cfg = toy_config(tmp_path, tiny_model_dir, "eval.before=false", "eval.every=1", "iterations=2")
    summary = train(cfg, log=lambda _: None)
    assert [e["iteration"] for e in summary["evals"]] == [1, 2]  # the periodic ones, none at 0
    assert summary["heldout_success_before"] is None and summary["heldout_gain"] is None
    assert summary["heldout_gain_ci"] is None and summary["heldout_success_after"] is not None
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["heldout_success_before"] is None
    assert heldout_change(summary).endswith("after RL (eval.before=false: no evaluation before it)")


def test_only_the_final_evaluation_when_none_is_periodic(toy_config, tmp_path, tiny_model_dir):
    cfg = toy_config(tmp_path, tiny_model_dir, "eval.before=false", "iterations=1")  # eval.every=0
    summary = train(cfg, log=lambda _: None)
    assert [e["iteration"] for e in summary["evals"]] == [1] and summary["heldout_gain"] is None


def test_by_default_the_start_model_is_evaluated_and_the_gain_reported(toy_config, tmp_path, tiny_model_dir):
    summary = train(toy_config(tmp_path, tiny_model_dir, "iterations=1"), log=lambda _: None)
    assert [e["iteration"] for e in summary["evals"]] == [0, 1]
    assert summary["heldout_gain"] == summary["heldout_success_after"] - summary["heldout_success_before"]
    assert heldout_change(summary).startswith(f"{summary['heldout_success_before']:.3f} -> ")


def test_a_resumed_run_without_the_evaluation_before_does_not_add_one(toy_config, tmp_path, tiny_model_dir):
    train(toy_config(tmp_path, tiny_model_dir, "eval.before=false", "iterations=1"), log=lambda _: None)
    summary = train(toy_config(tmp_path, tiny_model_dir, "eval.before=false", "iterations=2"), resume=True,
                    log=lambda _: None)
    assert [e["iteration"] for e in summary["evals"]] == [1, 2] and summary["heldout_success_before"] is None
