"""A command's one-line errors come before its heavy imports: a mistyped preset, override, model
path, --host or port is answered within a second, not after torch (3-4 s), a model load or
openenv's server (which imports gradio: 6 s)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# each: the command line, a word of its error, and a module that must not have been imported yet
CASES = [
    (["train", "no-such-preset"], "no config file or preset", "torch"),
    (["train", "household-tiny", "ppo.lr=abc"], "ppo.lr", "torch"),
    (["sft", "household-tiny", "sft.epochs=-1"], "sft.epochs", "torch"),
    (["gateway", "--model", "/no/such/model"], "does not exist", "torch"),
    (["gateway", "--model", "/no/such/model", "--engine", "jax"], "--engine must be hf or vllm", "torch"),
    (["serve", "agentgym/Household-v0", "--host", "0.0.0.0"], "--allow-remote", "openenv"),
    (["serve", "agentgym/Household-v0", "--port", "70000"], "0-65535", "openenv"),
]
# argv: the heavy module, then the command line
PROBE = """
import sys
from agentgym.cli import main
heavy, sys.argv = sys.argv[1], ["agentgym", *sys.argv[2:]]
try:
    main()
except SystemExit as exc:
    print("exit", exc.code, "imported" if heavy in sys.modules else "not imported")
"""


@pytest.mark.parametrize("argv, error, heavy", CASES, ids=[" ".join(c[0][:2]) + "..." for c in CASES])
def test_a_one_line_error_comes_before_the_heavy_imports(argv, error, heavy):
    done = subprocess.run([sys.executable, "-c", PROBE, heavy, *argv], capture_output=True, text=True, timeout=120)
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and error in lines[0], done.stderr
    assert done.stdout.split() == ["exit", "2", "not", "imported"], done.stdout + done.stderr
