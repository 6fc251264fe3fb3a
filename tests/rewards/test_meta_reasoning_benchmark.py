"""benchmarks/learning/meta_reasoning_household.py is resumable by (arm, seed): a re-run with other meta-reward
coefficients in the same --runs folder must not report the old coefficients' runs as its own (the
README's second command, --explore 0.02 ..., did exactly that with the default folder)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
mrh = pytest.importorskip("benchmarks.learning.meta_reasoning_household")


def _run(monkeypatch, tmp_path, argv):
    made = []
    monkeypatch.setattr(sys, "argv", ["meta_reasoning_household.py", *argv, "--runs", str(tmp_path)])
    monkeypatch.setattr(mrh, "start", lambda args, log: (tmp_path / "runs.json", list(_run.done), None, None, None, 0.3))
    monkeypatch.setattr(mrh, "run_arm", lambda arm, seed, *a: made.append((arm, seed, a[-1].explore)) or
                        {"arm": arm, "seed": seed, "final": 0.5, "redundant": 0.2, "mean_steps": 9, "seconds": 1,
                         "meta_reward_per_step": 0.0})
    monkeypatch.setattr(mrh, "table", lambda *a: None)
    mrh.main()
    _run.done += [{"arm": arm, "seed": seed} for arm, seed, _ in made]
    return made


def test_other_coefficients_in_the_same_folder_are_refused(monkeypatch, tmp_path):
    _run.done = []
    assert len(_run(monkeypatch, tmp_path, ["--seeds", "1"])) == 2  # outcome and meta, explore 0.1
    assert _run(monkeypatch, tmp_path, ["--seeds", "1"]) == []  # same settings: resumed, nothing to do
    with pytest.raises(SystemExit, match="other settings"):
        _run(monkeypatch, tmp_path, ["--seeds", "1", "--explore", "0.02", "--planning", "0.02", "--reflection", "0.02"])
