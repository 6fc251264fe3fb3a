"""trainers/setup.py (it looked like setuptools') is trainers/run_setup.py; the old import path
works for one release with a DeprecationWarning, and nothing in agentgym uses it any more."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


def test_old_setup_path_warns_and_gives_the_same_functions(monkeypatch):
    from agentgym.trainers import run_setup

    monkeypatch.delitem(sys.modules, "agentgym.trainers.setup", raising=False)
    with pytest.warns(DeprecationWarning, match="agentgym.trainers.run_setup"):
        old = importlib.import_module("agentgym.trainers.setup")
    for name in ("run_dir_for", "prepare_start_model", "make_policy", "make_engine", "build_heads", "make_optimizer",
                 "load_judge", "clear_previous_run", "quiet_transformers"):
        assert getattr(old, name) is getattr(run_setup, name)


def test_the_package_imports_the_new_path_only():
    code = ("import sys, agentgym.trainers.loop, agentgym.trainers.cli, agentgym.trainers.records, "
            "agentgym.trainers.checkpoint; print('agentgym.trainers.setup' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
