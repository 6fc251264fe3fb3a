"""Issue 53, item 6: what a command prints reads the same in a log file as on a terminal."""

import os
import subprocess
import sys
from pathlib import Path


def _agentgym(*args, cwd):
    exe = Path(sys.executable).parent / "agentgym"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_output_in_a_log_is_not_cut_at_80_columns(tmp_path):
    """Rich falls back to 80 columns off a terminal: tables cut their headers ("episod…") and lines wrap."""
    done = _agentgym("eval", "agentgym/Household-v0", "--policy", "oracle", "--split", "heldout", "--episodes", "1",
                     "-n", "4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any("at 80% power, not 10: evaluate on more tasks" in line for line in done.stdout.splitlines()), done.stdout
    assert "…" not in done.stdout
    rolled = _agentgym("rollout", "agentgym/Household-v0", "--policy", "oracle", "--limit", "2", cwd=tmp_path)
    header = next(line for line in rolled.stdout.splitlines() if "success" in line)
    assert all(word in header for word in ("episodes", "success", "score", "steps", "invalid", "infra err")), header


def test_rollout_says_how_many_episodes_it_will_play(tmp_path):
    done = _agentgym("rollout", "agentgym/Household-v0", "--policy", "oracle", "--limit", "2", "--episodes", "2",
                     cwd=tmp_path)
    assert "2 tasks x 2 episodes = 4 episodes" in done.stdout, done.stdout
    helped = _agentgym("rollout", "--help", cwd=tmp_path)
    assert "tasks x episodes" in " ".join(helped.stdout.replace("│", " ").split())


def test_the_output_console_is_wide_off_a_terminal(monkeypatch):
    from agentgym.progress import LOG_WIDTH, output_console

    monkeypatch.delenv("COLUMNS", raising=False)
    assert output_console().width == LOG_WIDTH  # pytest captures stdout: not a terminal
    monkeypatch.setenv("COLUMNS", "100")
    assert output_console().width == 100
