"""The example agent program (examples/gateway_agent.py) run as written against a gateway training
household-tiny for one short iteration, and the run it leaves: what `agentgym train` leaves, so
that `agentgym eval RUN_DIR` reproduces its held-out figure (issue 69, item 4)."""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("openai")

from agentgym.integrations.gateway.training import gateway_run_dir  # noqa: E402
from agentgym.trainers.config import load_config  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gateway_agent.py"


def test_a_gateway_run_has_a_run_dir_of_its_own():
    """`agentgym gateway --train household-tiny` right after `agentgym train household-tiny`: not its folder."""
    from agentgym.trainers.run_setup import run_dir_for

    cfg = load_config("household-tiny", [])
    assert gateway_run_dir(cfg.run_dir, cfg.name) == Path("runs/household-tiny-gateway") != run_dir_for(cfg)
    assert gateway_run_dir("elsewhere", cfg.name) == Path("elsewhere")


def test_the_example_agent_trains_through_the_gateway(tiny_model_dir, tmp_path, monkeypatch, capsys, gateway_training):
    run = tmp_path / "run"
    cfg = load_config("household-tiny", [f"policy.model={tiny_model_dir}", "tiny.build=false", "sft.enabled=false",
                                          "iterations=1", f"run_dir={run}", "torch_threads=1",
                                          "rollout.max_new_tokens=4", "eval.num_tasks=2", "eval.episodes_per_task=1"])
    lines = []
    thread, url, summary, failed = gateway_training(cfg, 300, episodes_per_iter=4, log=lines.append)
    layout = httpx.get(url + "/layout").json()
    assert layout["chat"]["parser"] == "raw" and layout["chat"]["history"] == 0  # household-tiny's layout
    # the program as a user runs it: `python examples/gateway_agent.py --gateway URL ...`, until the gateway closes
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--gateway", url, "--tasks", "2", "--group-size", "2"])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    thread.join(300)
    assert not thread.is_alive() and not failed, failed
    out = capsys.readouterr().out
    assert "round 1: mean reward" in out and "training is over" in out
    assert any("held-out success before RL" in line for line in lines)
    assert any("held-out success after RL" in line for line in lines)
    assert (run / "config.yaml").is_file() and (run / "final_model" / "config.json").is_file()
    saved = json.loads((run / "summary.json").read_text())
    assert saved["iterations"] == 1 and saved["heldout_tasks"] == 2 and "heldout_success_before" in saved

    from typer.testing import CliRunner

    from agentgym.cli import app

    # the run's own settings and held-out tasks: its final evaluation again, episode for episode
    result = CliRunner().invoke(app, ["eval", str(run), "--out", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    figures = re.search(r"final held-out success \(summary.json\): ([\d.]+); this evaluation: ([\d.]+)", result.output)
    assert figures and figures[1] == figures[2] == f"{saved['heldout_success_after']:.3f}", result.output

    def actions(path: Path) -> list:
        return [[step["action"] for step in json.loads(line)["steps"]] for line in path.read_text().splitlines()]

    final = actions(run / "evals" / "iter00001" / "trajectories.jsonl")
    assert final and actions(tmp_path / "eval" / "trajectories.jsonl") == final
