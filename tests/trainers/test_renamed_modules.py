"""trainers/setup.py (it looked like setuptools') is trainers/run_setup.py, trainers/loop.py (the LOOP
estimator's name) is trainers/training.py; the old import paths work for one release with a
DeprecationWarning, and nothing in agentgym uses them any more."""

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


def test_old_loop_path_warns_and_gives_the_same_functions(monkeypatch):
    from agentgym.trainers import training

    monkeypatch.delitem(sys.modules, "agentgym.trainers.loop", raising=False)
    with pytest.warns(DeprecationWarning, match="agentgym.trainers.training"):
        old = importlib.import_module("agentgym.trainers.loop")
    for name in ("train", "run_iteration", "evaluate_policy", "update_clip", "score_heads", "ppo_update",
                 "score_sequences", "equal_minibatches", "TrainingDiverged"):
        assert getattr(old, name) is getattr(training, name)


def test_the_package_imports_the_new_paths_only():
    code = ("import sys, agentgym.trainers.training, agentgym.trainers.cli, agentgym.trainers.records, "
            "agentgym.trainers.checkpoint, agentgym.evaluation.cli; "
            "print([m for m in ('agentgym.trainers.setup', 'agentgym.trainers.loop') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
