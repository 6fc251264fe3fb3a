"""Round 5 (issue 67 items 21-22) and a newcomer's resume (issue 69 item 5): what a run writes goes
only inside its run dir, a run dir that cannot be written is one line, a full disk at the first
checkpoint is one line, and `--resume` on a finished run leaves it byte for byte as it was.

The full disk is simulated where safetensors writes a model's weights: its writer raises the
SafetensorError it raises when the disk fills up ("IoError(Os { code: 28, kind: StorageFull ... })")."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from agentgym.errors import AgentGymError, ConfigError

FULL_DISK = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


def _snapshot(folder: Path) -> dict:
    """Every file under folder: its bytes' hash and its modification time."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    return out


@pytest.fixture
def finished(tmp_path, toy_config, sft_model_dir):
    """A finished run of one iteration, with its learning curves drawn."""
    from agentgym.trainers.training import train

    cfg = toy_config(tmp_path, sft_model_dir, "iterations=1", "log.plot=true")
    train(cfg, log=lambda _: None)
    return cfg


def test_newcomer3_resume_of_a_finished_run_leaves_it_byte_for_byte(tmp_path, finished, toy_config, sft_model_dir,
                                                                  capsys):
    """Issue 69, item 5: --resume on a finished run rewrote it (summary.json's wall_seconds, the last
    checkpoint, learning_curves.png) and said nothing; it is left byte for byte, with one line saying
    it is finished and where its results are."""
    from agentgym.trainers.cli import train_command
    from agentgym.trainers.training import train

    run = tmp_path / "run"
    before = _snapshot(run)
    assert "learning_curves.png" in before and "summary.json" in before
    lines: list[str] = []
    again = train(toy_config(tmp_path, sft_model_dir, "iterations=1", "log.plot=true"), resume=True, log=lines.append)
    assert _snapshot(run) == before
    assert len(lines) == 1 and "finished" in lines[0] and str(run / "summary.json") in lines[0], lines
    assert again["iterations"] == 1

    # `agentgym train CONFIG --resume`, with the run's own config.yaml: one line, nothing rewritten
    config = tmp_path / "config.yaml"
    config.write_bytes((run / "config.yaml").read_bytes())
    capsys.readouterr()
    train_command(str(config), [], run_dir=str(run), resume=True)
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "finished" in printed[0] and "summary.json" in printed[0], printed
    assert _snapshot(run) == before


def test_newcomer3_resume_with_more_iterations_continues_a_finished_run(tmp_path, finished, toy_config,
                                                                      sft_model_dir):
    """Issue 69, item 5: a finished run is finished for the iterations it was given; raised, --resume
    trains the rest."""
    from agentgym.trainers.training import train

    summary = train(toy_config(tmp_path, sft_model_dir, "iterations=2"), resume=True, log=lambda _: None)
    assert summary["iterations"] == 2


def test_round5_resume_never_writes_through_a_link_out_of_the_run_dir(tmp_path, finished, toy_config,
                                                                     sft_model_dir):
    """Round 5, item 21: --resume with final_model linked to a folder outside the run dir wrote the
    model's files into that folder; a link in the run dir is refused in one line, and nothing is
    written outside."""
    from agentgym.trainers.training import train

    run = tmp_path / "run"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    import shutil

    shutil.rmtree(run / "final_model")
    (run / "final_model").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError) as err:
        train(toy_config(tmp_path, sft_model_dir, "iterations=2"), resume=True, log=lambda _: None)
    message = str(err.value)
    assert "\n" not in message and str(run / "final_model") in message and "link" in message, message
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]

    # a link deeper in what the run writes (a weights file of a checkpoint) too; a link of the user's own
    # beside the run's files is left alone
    (run / "final_model").unlink()
    weights = next((run / "checkpoints").rglob("*.safetensors"))
    weights.unlink()
    weights.symlink_to(outside / "keep.txt")
    (run / "notes").symlink_to(outside)
    with pytest.raises(ConfigError, match="is a link") as err:
        train(toy_config(tmp_path, sft_model_dir, "iterations=2"), resume=True, log=lambda _: None)
    assert str(weights) in str(err.value)
    assert (outside / "keep.txt").read_text() == "mine"


def test_round5_a_run_dir_that_cannot_be_written_is_one_line(tmp_path, toy_config, sft_model_dir, monkeypatch):
    """Round 5, item 22: a run dir under a regular file, a regular file as the run dir and a run dir
    on a read-only filesystem gave tracebacks; each is one line naming the run dir."""
    from agentgym.trainers.training import train

    afile = tmp_path / "afile"
    afile.write_text("x")
    for run_dir, words in ((afile / "run", "is a file, not a folder"), (afile, "is a file, not a folder")):
        cfg = toy_config(tmp_path, sft_model_dir, "iterations=1", f"run_dir={run_dir}")
        with pytest.raises(ConfigError, match=words) as err:
            train(cfg, log=lambda _: None)
        assert "\n" not in str(err.value) and str(run_dir) in str(err.value)

    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "ro"))

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(tempfile, "mkstemp", read_only)  # what a read-only mount answers to the first write
    with pytest.raises(ConfigError, match="read-only filesystem") as err:
        train(toy_config(tmp_path, sft_model_dir, "iterations=1", f"run_dir={tmp_path / 'ro'}"), log=lambda _: None)
    assert "\n" not in str(err.value) and str(tmp_path / "ro") in str(err.value)
    assert list((tmp_path / "ro").iterdir()) == []


def test_round5_a_full_disk_at_the_first_checkpoint_is_one_line(tmp_path, toy_config, sft_model_dir, monkeypatch):
    """Round 5, item 22: the disk filling up while the first checkpoint's weights were written (safetensors'
    SafetensorError, not an OSError) gave a traceback; it is one line naming the disk and the run dir,
    and no half-written checkpoint is left."""
    import safetensors
    import transformers.modeling_utils as modeling_utils

    from agentgym.trainers.training import train

    def full(*args, **kwargs):
        raise safetensors.SafetensorError(FULL_DISK)

    monkeypatch.setattr(modeling_utils, "safe_save_file", full)
    with pytest.raises(AgentGymError) as err:
        train(toy_config(tmp_path, sft_model_dir, "iterations=1"), log=lambda _: None)
    message = str(err.value)
    assert "\n" not in message and "full" in message and str(tmp_path / "run") in message, message
    assert isinstance(err.value, OSError) and err.value.errno == errno.ENOSPC
    checkpoints = tmp_path / "run" / "checkpoints"
    assert not [p.name for p in checkpoints.iterdir() if p.name.startswith(".tmp")] if checkpoints.exists() else True
    assert not os.path.exists(checkpoints / "latest")
