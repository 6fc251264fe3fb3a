import json
import sys

import pytest
import typer
import yaml
from typer.testing import CliRunner

from agentgym.errors import AgentGymError, ConfigError, MissingExtraError
from agentgym.evaluation.cli import load_policy, parse_policy_spec, register, training_settings

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def invoke(*args: str):
    # standalone_mode=False lets AgentGymError reach us, as it reaches `agentgym.cli.main`,
    # which prints it as one line.
    return runner.invoke(_app(), list(args), standalone_mode=False)


def one_line_error(result, kind=AgentGymError) -> str:
    assert isinstance(result.exception, kind), result.output
    message = str(result.exception)
    assert message and "\n" not in message
    return message


def test_eval_oracle_prints_summary_and_writes_report(counter_env, tmp_path):
    out = tmp_path / "oracle"
    result = invoke("eval", counter_env, "--policy", "oracle", "--episodes", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "success rate" in result.output and "1.000" in result.output and "pass@2" in result.output
    assert "up-hard" in result.output  # category table
    report = json.loads((out / "report.json").read_text())
    assert report["overall"]["success_rate"]["value"] == 1.0 and report["policy"] == "oracle"
    assert report["metadata"]["policy_spec"] == "oracle"
    assert "| success rate | 1.000 |" in (out / "report.md").read_text()
    assert (out / "report.png").stat().st_size > 0
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 12


def test_eval_random_with_limit_and_split_file_then_compare(counter_env, tmp_path):
    heldout = tmp_path / "unseen.jsonl"
    from agentgym import get_task_space
    from agentgym.tasks.splits import save_split

    save_split(heldout, get_task_space(counter_env).build_splits()["heldout_unseen"])
    r1 = invoke("eval", counter_env, "-p", "random", "-s", str(heldout), "-k", "3", "-o", str(tmp_path / "a"))
    assert r1.exit_code == 0, r1.output
    assert json.loads((tmp_path / "a" / "report.json").read_text())["split"] == "unseen.jsonl"
    r2 = invoke("eval", counter_env, "-p", "oracle", "-s", "heldout", "-n", "2", "-o", str(tmp_path / "b"))
    assert r2.exit_code == 0, r2.output
    assert json.loads((tmp_path / "b" / "report.json").read_text())["metadata"]["tasks"] == 2
    r3 = invoke("eval-compare", str(tmp_path / "a"), str(tmp_path / "b" / "report.json"),
                "-l", "random", "-l", "oracle", "-o", str(tmp_path / "cmp"))
    assert r3.exit_code == 0, r3.output
    assert "Δ success vs random" in (tmp_path / "cmp" / "compare.md").read_text()
    assert (tmp_path / "cmp" / "compare.png").is_file()


def test_without_matplotlib_eval_and_compare_write_their_data_and_say_the_figure_was_not_drawn(
        counter_env, tmp_path, monkeypatch):
    """A core install (`pip install agentgym-credit`, or the openai extra) has no matplotlib: the
    evaluation's report.json and report.md are what it is for, so a missing PNG does not fail it."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    for name in ("a", "b"):
        result = invoke("eval", counter_env, "--policy", "oracle", "--limit", "2", "--out", str(tmp_path / name))
        assert result.exit_code == 0, result.output
        assert "report.png not drawn: matplotlib is not installed" in result.output
        assert (tmp_path / name / "report.json").is_file() and not (tmp_path / name / "report.png").exists()
    result = invoke("eval-compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "cmp"))
    assert result.exit_code == 0, result.output
    assert "compare.png not drawn: matplotlib is not installed" in result.output
    assert (tmp_path / "cmp" / "compare.md").is_file() and not (tmp_path / "cmp" / "compare.png").exists()


@pytest.mark.parametrize("args, kind, fragment", [
    (["--split", "validation"], AgentGymError, "unknown split 'validation'"),
    (["--split", "missing/tasks.jsonl"], AgentGymError, "does not exist"),
    (["--policy", "gpt"], ConfigError, "unknown policy 'gpt'"),
    (["--policy", "hf:"], ConfigError, "needs a model folder"),
    (["--policy", "hf:./no/such/model"], ConfigError, "model path './no/such/model' does not exist"),
    (["--policy", "openai:localhost"], ConfigError, "write openai:URL:MODEL"),
    (["--policy", "openai:http://localhost:8000"], ConfigError, "write openai:URL:MODEL"),
    (["--episodes", "0"], ConfigError, "--episodes must be >= 1"),
    (["--limit", "0"], ConfigError, "--limit must be a positive"),
    (["--history", "lots"], ConfigError, "--history must be"),
    (["--confidence", "95"], ConfigError, "--confidence"),
])
def test_user_errors_are_one_clear_line(counter_env, args, kind, fragment):
    message = one_line_error(invoke("eval", counter_env, *args), kind)
    assert fragment in message


def test_unknown_env_is_one_line():
    assert "unknown environment" in one_line_error(invoke("eval", "agentgym/Nope-v0"))


def test_compare_errors_are_one_line(tmp_path):
    assert "no evaluation report" in one_line_error(invoke("eval-compare", str(tmp_path)))


def test_an_out_folder_that_cannot_be_made_is_one_line_before_any_episode(counter_env, tmp_path):
    """It was a FileExistsError traceback after the last episode, the evaluation lost."""
    in_the_way = tmp_path / "report"
    in_the_way.write_text("a file")
    result = invoke("eval", counter_env, "--policy", "oracle", "--out", str(in_the_way))
    assert "is a file, not a folder: pass --out a folder you can write" in one_line_error(result, ConfigError)
    assert "loading" not in result.output
    assert invoke("eval", counter_env, "--policy", "oracle", "--out", str(tmp_path / "good")).exception is None
    result = invoke("eval-compare", str(tmp_path / "good"), "--out", str(in_the_way / "compare"))
    assert "report is a file, not a folder" in one_line_error(result, ConfigError)


def test_policy_spec_parsing():
    assert parse_policy_spec("random").kind == "random"
    spec = parse_policy_spec("openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct")
    assert (spec.kind, spec.target, spec.model) == ("openai", "http://localhost:8000/v1", "Qwen/Qwen2.5-1.5B-Instruct")
    spec = parse_policy_spec("openai:https://api.example.com/v1:llama3:8b")  # model names may hold ':'
    assert (spec.target, spec.model) == ("https://api.example.com/v1", "llama3:8b")
    spec = parse_policy_spec("openai:http://127.0.0.1:9000:tiny")
    assert (spec.target, spec.model) == ("http://127.0.0.1:9000", "tiny")
    assert parse_policy_spec("hf:Qwen/Qwen2.5-1.5B-Instruct").target == "Qwen/Qwen2.5-1.5B-Instruct"  # hub id
    assert parse_policy_spec("hf:Qwen/Qwen2.5-1.5B-Instruct").label == "hf:Qwen2.5-1.5B-Instruct"


def test_searching_policy_needs_an_env_with_a_searching_demonstrator(counter_env):
    assert parse_policy_spec("searching").kind == "searching"
    assert load_policy(parse_policy_spec("searching"), "agentgym/Household-v0").search
    with pytest.raises(ConfigError, match="no searching demonstrator"):  # the counter has only the plain oracle
        load_policy(parse_policy_spec("searching"), "agentgym/EvalCounter-v0")


def test_openai_backend_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "agentgym.policies.openai_compat", None)
    spec = parse_policy_spec("openai:http://localhost:8000/v1:m")
    with pytest.raises(MissingExtraError) as info:
        load_policy(spec, "agentgym/EvalCounter-v0")
    assert "\n" not in str(info.value)


def test_training_settings_come_from_the_run_config(tmp_path):
    run = tmp_path / "run"
    model = run / "final_model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (run / "config.yaml").write_text(yaml.safe_dump(
        {"env": {"chat": {"history": "full", "parser": "tag"}}, "rollout": {"max_new_tokens": 24}}))
    settings = training_settings(str(model))
    assert settings["chat"] == {"history": "full", "parser": "tag"} and settings["max_new_tokens"] == 24
    assert training_settings(str(tmp_path / "elsewhere")) == {}


@pytest.mark.slow
def test_eval_hf_tiny_model_end_to_end(counter_env, tmp_path):
    """A random-weight tiny model through `--policy hf:PATH`: token ids recorded, metrics computed."""
    pytest.importorskip("transformers")
    from agentgym.policies.tiny import build_tiny_model

    texts = ["The counter shows 0. Make the counter equal 3. <action>inc</action> <action>dec</action> look"] * 20
    model = build_tiny_model(tmp_path / "tiny", env_id=counter_env, texts=texts, vocab_size=300, hidden=32,
                             layers=1, heads=2)
    out = tmp_path / "hf"
    result = invoke("eval", counter_env, "--policy", f"hf:{model}", "--limit", "2", "--device", "cpu",
                    "--max-new-tokens", "4", "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["policy"] == "hf:tiny" and report["overall"]["episodes"] == 2
    assert report["metadata"]["sampling"]["temperature"] == 0.0
    first = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
    step = first["steps"][0]
    assert step["prompt_ids"] and 1 <= len(step["response_ids"]) <= 4
    assert len(step["response_logprobs"]) == len(step["response_ids"])
