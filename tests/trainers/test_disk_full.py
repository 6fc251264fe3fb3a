"""Issue 52 item 16: the disk filling up during training. The run stops with one line naming
the disk and the run dir, the last complete checkpoint stays what `latest` names and resumes,
and no half-written checkpoint folder is left behind. The full disk is simulated by making the
writers raise ENOSPC, as a full filesystem does."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch

from agentgym.errors import AgentGymError
from tests.trainers.test_checkpoint_safety import _config


def _enospc(path="x"):
    return OSError(errno.ENOSPC, "No space left on device", str(path))


@pytest.mark.parametrize("where", ["checkpoint", "metrics"])
def test_a_full_disk_is_one_line_and_the_last_checkpoint_is_intact(where, tmp_path, monkeypatch, toy_env_id,
                                                                   tiny_model_dir):
    from agentgym.trainers import checkpoint as checkpoint_module
    from agentgym.trainers import logging_utils
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.training import train

    cfg = _config(tmp_path, tiny_model_dir, "iterations=3")
    run_dir = Path(cfg.run_dir) if hasattr(cfg, "run_dir") and cfg.run_dir else tmp_path / "run"
    calls = {"n": 0}
    if where == "checkpoint":
        real_save = torch.save

        # iteration 2's checkpoint (after those of the evaluation before RL and of iteration 1) finds the disk full
        def save(obj, path, *args, **kwargs):
            if str(path).endswith("trainer.pt"):
                calls["n"] += 1
                if calls["n"] == 3:
                    Path(path).write_bytes(b"half")
                    raise _enospc(path)
            return real_save(obj, path, *args, **kwargs)

        monkeypatch.setattr(checkpoint_module.torch, "save", save)
    else:
        real_log = logging_utils.MetricsLogger.log

        def log(self, metrics, step=None):
            calls["n"] += 1
            if step == 2:
                raise _enospc(Path(self.run_dir) / "metrics.jsonl" if hasattr(self, "run_dir") else "metrics.jsonl")
            return real_log(self, metrics, step=step)

        monkeypatch.setattr(logging_utils.MetricsLogger, "log", log)
    with pytest.raises(AgentGymError) as err:
        train(cfg, log=lambda _: None)
    text = str(err.value)
    assert "\n" not in text and "full" in text and str(run_dir) in text and "iter_000001" in text, text
    assert isinstance(err.value, OSError) and err.value.errno == errno.ENOSPC
    checkpoints = run_dir / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "iter_000001"
    assert latest_checkpoint(run_dir) == checkpoints / "iter_000001"  # checked whole: it resumes
    assert not [p.name for p in checkpoints.iterdir() if p.name.startswith(".tmp")]
