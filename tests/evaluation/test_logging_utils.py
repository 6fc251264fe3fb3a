import json
import math
import subprocess
import sys

import numpy as np
import pytest

from agentgym.errors import MissingExtraError
from agentgym.trainers.logging_utils import MetricsLogger, flatten, plot_learning_curves, read_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_one_line_per_log_with_step_and_flattened_names(tmp_path):
    with MetricsLogger(tmp_path / "run", tensorboard=False, wandb=False) as logger:
        logger.log({"loss": 1.5, "eval": {"success": 0.25}}, step=1)
        logger.log({"loss": np.float32(0.75), "kl": np.array(0.125), "done": True}, step=2)
    lines = _lines(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in lines] == [1, 2]
    assert lines[0]["loss"] == 1.5 and lines[0]["eval/success"] == 0.25
    assert lines[1]["loss"] == 0.75 and lines[1]["kl"] == 0.125 and lines[1]["done"] is True
    assert all(isinstance(r["time"], float) for r in lines)
    assert logger.backends == ["jsonl"]


def test_non_finite_values_are_written_as_null_so_the_file_stays_strict_json(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False, wandb=False) as logger:
        logger.log({"loss": float("nan"), "ratio": math.inf, "ok": 1}, step=3)
    text = (tmp_path / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    record = json.loads(text)
    assert record["loss"] is None and record["ratio"] is None and record["ok"] == 1


def test_reserved_names_are_refused(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False, wandb=False) as logger:
        with pytest.raises(ValueError, match="reserved"):
            logger.log({"step": 3}, step=3)


def test_appends_across_loggers_and_resume_drops_steps_after_the_checkpoint(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False, wandb=False) as logger:
        for step in range(1, 6):
            logger.log({"loss": float(step)}, step=step)
    # The run crashed after step 5; its checkpoint was taken at step 3.
    with MetricsLogger(tmp_path, tensorboard=False, wandb=False, resume_from_step=3) as logger:
        logger.log({"loss": 40.0}, step=4)
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert records[-1]["loss"] == 40.0


def test_read_metrics_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "lo')
    assert read_metrics(path) == [{"step": 1, "loss": 2.0}]


def test_flatten_nests_with_slashes():
    assert flatten({"a": {"b": {"c": 1}}, "d": 2}) == {"a/b/c": 1, "d": 2}


def test_wandb_auto_stays_off_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb="auto")
    assert "wandb" not in logger.backends
    logger.close()


def test_wandb_required_but_missing_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    monkeypatch.delenv("WANDB_MODE", raising=False)
    with pytest.raises(MissingExtraError, match="agentgym-credit\\[logging\\]"):
        MetricsLogger(tmp_path, tensorboard=False, wandb=True)


def test_tensorboard_required_but_missing_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(MissingExtraError, match="agentgym-credit\\[logging\\]"):
        MetricsLogger(tmp_path, tensorboard=True, wandb=False)


@pytest.mark.slow
@pytest.mark.parametrize("writer", ["tensorboardX", "torch"])
def test_tensorboard_event_file_holds_the_logged_scalars(tmp_path, monkeypatch, writer):
    """Either writer, the other one absent: tensorboardX without torch (the logging extra alone),
    torch's own writer without tensorboardX (the train extra with tensorboard)."""
    pytest.importorskip("tensorboard")
    pytest.importorskip(writer)
    monkeypatch.setitem(sys.modules, "torch" if writer == "tensorboardX" else "tensorboardX", None)
    with MetricsLogger(tmp_path, tensorboard=True, wandb=False) as logger:
        assert "tensorboard" in logger.backends
        logger.log({"loss": 0.5}, step=7)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    events = acc.Scalars("loss")
    assert [(e.step, e.value) for e in events] == [(7, 0.5)]


def test_module_import_does_not_import_torch():
    code = ("import sys, agentgym.trainers.logging_utils, agentgym.evaluation.evaluate, agentgym.evaluation.stats, "
            "agentgym.evaluation.report, agentgym.evaluation.cli; "
            "print('torch' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_plot_learning_curves_single_run_writes_png(tmp_path):
    with MetricsLogger(tmp_path / "run", tensorboard=False, wandb=False) as logger:
        for step in range(10):
            metrics = {"loss": 1.0 / (step + 1)}
            if step % 5 == 4:
                metrics["eval/success"] = step / 10
            logger.log(metrics, step=step)
    out = plot_learning_curves(tmp_path / "run", keys=["loss", "eval/success"], smooth=0.5)
    assert out == tmp_path / "run" / "learning_curves.png"
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 5000


def test_plot_learning_curves_overlays_runs_and_rejects_unknown_keys(tmp_path):
    for name, scale in (("grpo", 1.0), ("gigpo", 2.0)):
        with MetricsLogger(tmp_path / name, tensorboard=False, wandb=False) as logger:
            for step in range(5):
                logger.log({"success": scale * step / 10}, step=step)
    runs = {"grpo": tmp_path / "grpo", "gigpo": tmp_path / "gigpo" / "metrics.jsonl"}
    out = plot_learning_curves(runs, keys=["success"], out_png=tmp_path / "cmp.png", title="success")
    assert out.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match="none of the keys"):
        plot_learning_curves(runs, keys=["nope"], out_png=tmp_path / "x.png")
    with pytest.raises(ValueError, match="out_png is required"):
        plot_learning_curves(runs, keys=["success"])


@pytest.mark.slow
def test_wandb_offline_run_gets_the_metrics(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    with MetricsLogger(tmp_path, tensorboard=False, wandb="auto", config={"lr": 0.1}) as logger:
        assert "wandb" in logger.backends
        run = logger._wandb
        logger.log({"loss": 0.5, "eval": {"success": 1.0}}, step=1)
        assert run.config["lr"] == 0.1
    assert list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb")), "no offline W&B run written"


@pytest.mark.slow
def test_wandb_online_without_credentials_goes_offline_instead_of_prompting(tmp_path, monkeypatch, capsys):
    pytest.importorskip("wandb")
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("WANDB_PROJECT", "agentgym-test")
    monkeypatch.setenv("WANDB_SILENT", "true")
    with MetricsLogger(tmp_path, tensorboard=False, wandb="auto") as logger:
        assert "wandb" in logger.backends
        logger.log({"loss": 1.0}, step=1)
    assert "offline mode" in capsys.readouterr().err
