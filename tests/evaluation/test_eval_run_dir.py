"""Issue 39, item 2: `agentgym eval RUN_DIR` evaluates a training run's final model the way the
trainer did (env, tasks, chat layout, sampling, episodes, env settings, seed), so its figures
match the run's own; `eval-compare` warns when two reports were not measured alike."""

import json

import pytest
from typer.testing import CliRunner

from agentgym.cli import app

pytest.importorskip("transformers")

CHAT = {"history": 1, "system_prompt": "Act.", "parser": "raw"}


@pytest.fixture(scope="module")
def tiny_run(counter_env, tmp_path_factory):
    """A two-iteration run on the counting game: tiny model, SFT, sampled evaluation (2 episodes a
    task, temperature 1) with a step limit of 4 instead of the env's 6."""
    import torch

    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import train

    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("tiny_run") / "run"
    cfg = load_config({"env": {"chat": dict(CHAT), "env_kwargs": {"max_episode_steps": 4}}}, [
        f"env.id={counter_env}", f"run_dir={run}", "iterations=2", "tiny.build=true", "tiny.vocab_size=300",
        "tiny.hidden=32", "tiny.heads=2", "tiny.num_tasks=4", "sft.enabled=true", "sft.num_tasks=4", "sft.epochs=40",
        "sft.batch_size=4", "sft.lr=3e-3", "rollout.tasks_per_iter=2", "rollout.group_size=2",
        "rollout.max_new_tokens=6", "eval.every=0", "eval.temperature=1.0", "eval.episodes_per_task=2",
        "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "log.plot=false", "log.tensorboard=false",
        "log.save_trajectories_every=1", "checkpoint_every=0", "torch_threads=1"])
    summary = train(cfg, log=lambda line: None)
    return run, summary


def _overall(report: dict) -> dict:
    return {k: round(v["value"], 9) for k, v in report["overall"].items() if isinstance(v, dict)}


def test_eval_run_dir_reproduces_the_runs_heldout_figures(tiny_run, tmp_path):
    run, summary = tiny_run
    result = CliRunner().invoke(app, ["eval", str(run), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    trainer = json.loads((run / "evals" / "iter00002" / "report.json").read_text())  # the run's final evaluation
    assert again["overall"]["success_rate"]["value"] == summary["heldout_success_after"]
    assert _overall(again) == _overall(trainer)  # success, score, steps and invalid-action rate alike
    assert again["overall"]["episodes"] == 12 and again["metadata"]["env_kwargs"] == {"max_episode_steps": 4}
    assert max(t["mean_steps"] for t in again["per_task"]) <= 4  # the run's step limit, not the env's 6
    assert f"summary.json): {summary['heldout_success_after']:.3f}" in result.output
    assert 0 < again["overall"]["invalid_action_rate"]["value"] < 1, "a trivial policy would prove little"


def test_from_run_with_another_model_uses_the_runs_settings(tiny_run, tmp_path):
    """The SFT warm start on the run's settings gives the trainer's before-RL figure."""
    run, summary = tiny_run
    result = CliRunner().invoke(app, ["eval", "--from-run", str(run), "--policy", f"hf:{run / 'sft_model'}",
                                      "--out", str(tmp_path / "sft")])
    assert result.exit_code == 0, result.output
    before = json.loads((run / "evals" / "iter00000" / "report.json").read_text())
    assert _overall(json.loads((tmp_path / "sft" / "report.json").read_text())) == _overall(before)


def test_eval_compare_warns_when_reports_were_not_measured_alike(tiny_run, tmp_path):
    run, _ = tiny_run
    runner = CliRunner()
    assert runner.invoke(app, ["eval", str(run), "--out", str(tmp_path / "a")]).exit_code == 0
    standalone = runner.invoke(app, ["eval", "agentgym/EvalCounter-v0", "--policy", f"hf:{run / 'final_model'}",
                                     "--limit", "4", "--out", str(tmp_path / "b")])
    assert standalone.exit_code == 0, standalone.output
    result = runner.invoke(app, ["eval-compare", str(tmp_path / "a"), str(tmp_path / "b"), "-l", "run", "-l", "bare"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "warning: bare vs run:" in text and "not comparable" in text
    for what in ("tasks (", "episodes per task 2 vs 1", "env settings (max_episode_steps 4 vs None",
                 "sampling (temperature 1.0 vs 0.0"):
        assert what in text, text
    same = runner.invoke(app, ["eval-compare", str(tmp_path / "a"), str(tmp_path / "a"), "-l", "x", "-l", "y"])
    assert "warning" not in same.output


def test_a_folder_that_is_not_a_run_and_an_unusable_device_are_one_line(counter_env, tmp_path):
    import torch

    result = CliRunner().invoke(app, ["eval", "--from-run", str(tmp_path)])
    assert result.exit_code != 0 and "not an `agentgym train` run folder" in str(result.exception)
    if not torch.cuda.is_available():
        result = CliRunner().invoke(app, ["eval", counter_env, "--policy", f"hf:{tmp_path}", "--device", "cuda"])
        assert result.exit_code != 0 and "--device=cuda but this machine has" in str(result.exception)


def test_eval_imports_the_module_that_registers_a_users_env(tmp_path, monkeypatch):
    (tmp_path / "my_counter.py").write_text(
        "import agentgym\nfrom agentgym.toy import register_counter\nregister_counter()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from agentgym.toy import COUNTER_ID

    result = CliRunner().invoke(app, ["eval", COUNTER_ID, "--import", "my_counter", "--policy", "oracle"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["eval", COUNTER_ID, "--import", "no_such_module_here"])
    assert result.exit_code != 0 and "cannot import 'no_such_module_here'" in str(result.exception)


def test_a_bare_hf_path_of_a_runs_model_names_eval_run_dir(tiny_run, tmp_path):
    """`eval ENV --policy hf:RUN/final_model` plays the env's defaults, not the run's settings: it says
    how to get the run's figure instead."""
    run, _ = tiny_run
    result = CliRunner().invoke(app, ["eval", "agentgym/EvalCounter-v0", "--policy", f"hf:{run / 'final_model'}",
                                      "--limit", "2", "--out", str(tmp_path / "bare")])
    assert result.exit_code == 0, result.output
    assert f"evaluate it as the trainer did: agentgym eval {run}" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["eval", str(run), "--limit", "2", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0 and "evaluate it as the trainer did" not in result.output


def test_sft_command_writes_the_config_that_eval_reads(counter_env, tmp_path):
    """`agentgym sft` records its config.yaml like `agentgym train`, so `agentgym eval RUN/sft_model`
    prompts with the chat layout the model was cloned on, not the defaults."""
    from agentgym.evaluation.cli import training_settings

    run = tmp_path / "sft_run"
    config = tmp_path / "sft.yaml"
    config.write_text(json.dumps({"env": {"id": counter_env, "chat": dict(CHAT)}}))
    result = CliRunner().invoke(app, ["sft", str(config), "--run-dir", str(run), "tiny.build=true", "tiny.vocab_size=300",
                                      "tiny.hidden=32", "tiny.heads=2", "tiny.num_tasks=4", "sft.num_tasks=4",
                                      "sft.epochs=1", "eval.num_tasks=2", "torch_threads=1", "log.plot=false"])
    assert result.exit_code == 0, result.output
    settings = training_settings(str(run / "sft_model"))
    assert settings["chat"]["history"] == 1 and settings["chat"]["system_prompt"] == "Act.", settings
