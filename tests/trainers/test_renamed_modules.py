"""trainers/setup.py (it looked like setuptools') is trainers/run_setup.py, trainers/loop.py (the LOOP
estimator's name) is trainers/training.py; the old import paths work for one release with a
DeprecationWarning, and nothing in agentgym uses them any more."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


SHIMS = {
    "agentgym.trainers.setup": ("agentgym.trainers.run_setup", (
        "run_dir_for", "prepare_start_model", "make_policy", "make_engine", "build_heads", "make_optimizer",
        "load_judge", "clear_previous_run", "quiet_transformers")),
    "agentgym.trainers.loop": ("agentgym.trainers.training", (
        "train", "run_iteration", "evaluate_policy", "update_clip", "score_heads", "ppo_update",
        "score_sequences", "equal_minibatches", "TrainingDiverged")),
}


@pytest.mark.parametrize("old_path", sorted(SHIMS))
def test_old_path_warns_and_gives_the_same_functions(old_path, monkeypatch):
    new_path, names = SHIMS[old_path]
    new = importlib.import_module(new_path)
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    with pytest.warns(DeprecationWarning, match=new_path):
        old = importlib.import_module(old_path)
    for name in names:
        assert getattr(old, name) is getattr(new, name)


def test_the_package_imports_the_new_paths_only():
    code = ("import sys, agentgym.trainers.training, agentgym.trainers.cli, agentgym.trainers.records, "
            "agentgym.trainers.checkpoint, agentgym.evaluation.cli; "
            "print([m for m in ('agentgym.trainers.setup', 'agentgym.trainers.loop') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
