"""Issue 39, items 1, 4, 6, 9: a given model is always that model (a tiny one is built only in the
run dir, only when none is given); built tiny / SFT models are reused only when their settings
match; the device and the model are checked in one line before anything is built; hub ids are
never mistaken for paths and offline mode fails at once."""

import json
import time

import pytest

from agentgym.errors import ConfigError

from .conftest import SHORT_CHAT, TOY_ID


def _cfg(tmp_path, *overrides):
    from agentgym.trainers.config import load_config

    return load_config({"env": {"chat": dict(SHORT_CHAT)}}, [
        f"env.id={TOY_ID}", f"run_dir={tmp_path}/run", "tiny.build=true", "tiny.vocab_size=300", "tiny.hidden=32",
        "tiny.heads=2", "tiny.num_tasks=6", "sft.num_tasks=4", "sft.epochs=1", "sft.batch_size=8", *overrides])


def _prepare(cfg, tmp_path):
    from agentgym.trainers.run_setup import prepare_start_model

    lines: list[str] = []
    model, _ = prepare_start_model(cfg, tmp_path / "run", log=lines.append)
    return model, "\n".join(lines)


def _main(capsys, monkeypatch, *args):
    """`agentgym ARGS` as a user runs it (the entry point turns errors into one line, exit 2)."""
    from agentgym.cli import main

    monkeypatch.setattr("sys.argv", ["agentgym", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    captured = capsys.readouterr()
    return exit_.value.code, captured.out + captured.err


def test_a_given_model_is_trained_as_given_even_with_tiny_build(tmp_path, toy_env_id, tiny_model_dir):
    before = {p.name: p.stat().st_mtime_ns for p in tiny_model_dir.iterdir()}
    model, log = _prepare(_cfg(tmp_path, f"policy.model={tiny_model_dir}"), tmp_path)
    assert str(model) == str(tiny_model_dir)
    assert not (tmp_path / "run" / "tiny_model").exists()
    assert {p.name: p.stat().st_mtime_ns for p in tiny_model_dir.iterdir()} == before
    assert "tiny.build applies only when policy.model is empty" in log


def test_a_missing_model_path_fails_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for given in (str(tmp_path / "no" / "such" / "model"), "Qwen/Qwen2.5-0.5B-Instruct-typo/extra"):
        code, text = _main(capsys, monkeypatch, "train", "household-tiny", f"policy.model={given}")  # household-tiny: tiny.build=true
        assert code == 2 and "does not exist" in text and len(text.strip().splitlines()) == 1, text
    assert list(tmp_path.iterdir()) == []  # no model, no run folder


def test_hub_ids_with_dots_are_hub_ids_and_offline_mode_fails_at_once(monkeypatch):
    from agentgym.policies.model_files import check_model_path, looks_local

    assert not looks_local("Qwen/Qwen2.5-0.5B-Instruct") and not looks_local("gpt2")
    assert looks_local("./Qwen2.5") and looks_local("runs/x/final_model") and looks_local("/abs/model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="offline mode is on"):
        check_model_path("nobody-here/Tiny-0.5B-Instruct")
    assert time.perf_counter() - t0 < 5  # no retries


def test_tiny_model_is_built_in_the_run_dir_and_reused_only_when_its_settings_match(tmp_path, toy_env_id):
    model, log = _prepare(_cfg(tmp_path), tmp_path)
    assert model == tmp_path / "run" / "tiny_model" and "built a tiny model" in log
    assert json.loads((model / "config.json").read_text())["hidden_size"] == 32
    _, log = _prepare(_cfg(tmp_path), tmp_path)
    assert "reusing the tiny model" in log and "built a tiny model" not in log
    _, log = _prepare(_cfg(tmp_path, "tiny.hidden=16"), tmp_path)
    assert "rebuilding the tiny model" in log and "tiny.hidden 32 -> 16" in log, log
    assert json.loads((model / "config.json").read_text())["hidden_size"] == 16


def test_sft_model_is_reused_only_when_its_settings_match(tmp_path, toy_env_id):
    model, log = _prepare(_cfg(tmp_path, "sft.enabled=true"), tmp_path)
    assert model == tmp_path / "run" / "sft_model" and "SFT done" in log
    _, log = _prepare(_cfg(tmp_path, "sft.enabled=true"), tmp_path)
    assert "reusing the SFT warm start" in log and "SFT done" not in log
    _, log = _prepare(_cfg(tmp_path, "sft.enabled=true", "sft.lr=0.002"), tmp_path)
    assert "rebuilding the SFT warm start" in log and "sft.lr" in log and "SFT done" in log, log
    # a folder without a record (an older run, or an interrupted build) is never trusted
    (model / "agentgym_settings.json").unlink()
    _, log = _prepare(_cfg(tmp_path, "sft.enabled=true", "sft.lr=0.002"), tmp_path)
    assert "no settings record" in log and "SFT done" in log


def test_an_unusable_device_is_one_line_before_anything_is_built(tmp_path, monkeypatch, capsys, toy_env_id):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="policy.device=cuda .*set policy.device=cpu"):
        _prepare(_cfg(tmp_path, "policy.device=cuda"), tmp_path)
    assert not (tmp_path / "run").exists()
    monkeypatch.chdir(tmp_path)
    code, text = _main(capsys, monkeypatch, "train", "household-tiny", "policy.device=cuda")
    assert code == 2 and "policy.device=cuda" in text and len(text.strip().splitlines()) == 1, text
    code, text = _main(capsys, monkeypatch, "train", "household-tiny", "policy.device=gpu")
    assert code == 2 and "not a device" in text, text
    assert list(tmp_path.iterdir()) == []


def test_a_tiny_model_left_at_a_hub_ids_path_never_stands_in_for_it(tmp_path, monkeypatch, capsys):
    """An older agentgym built a random tiny model at ./Qwen/Qwen2.5-0.5B-Instruct; transformers loads a
    folder of that name before the hub's model, so the hub id would silently mean the random model."""
    from agentgym.policies.model_files import check_model_path

    monkeypatch.chdir(tmp_path)
    shadow = tmp_path / "Qwen" / "Qwen2.5-0.5B-Instruct"
    shadow.mkdir(parents=True)
    (shadow / "config.json").write_text("{}")
    (shadow / "agentgym_tiny.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"\./Qwen/Qwen2\.5-0\.5B-Instruct here holds an untrained tiny model"):
        check_model_path("Qwen/Qwen2.5-0.5B-Instruct", what="policy.model")
    check_model_path("./Qwen/Qwen2.5-0.5B-Instruct")  # asked for by its path: that folder
    code, text = _main(capsys, monkeypatch, "train", "household-tiny", "policy.model=Qwen/Qwen2.5-0.5B-Instruct",
                       "iterations=0", "--run-dir", str(tmp_path / "run"))
    assert code == 2 and "delete or rename" in text and len(text.strip().splitlines()) == 1, text
    assert not (tmp_path / "run").exists()
    # a model downloaded into a folder named like its hub id is the user's own: it loads
    (shadow / "agentgym_tiny.json").unlink()
    check_model_path("Qwen/Qwen2.5-0.5B-Instruct")
