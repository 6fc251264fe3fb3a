"""benchmarks/learning/verdict.py: each setting's own overrides (docs/verdict.md, amendment of
2026-11-29) reach every job's config, between the common ones and the user's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.learning import verdict  # noqa: E402


def args_for(setting: str, overrides: list[str]) -> argparse.Namespace:
    return argparse.Namespace(setting=setting, preset=verdict.SETTINGS[setting].preset, overrides=overrides)


def test_smol_jobs_decode_on_the_pool_engine_and_tiny_jobs_are_unchanged(tmp_path):
    smol = verdict.config(args_for("smol", []), 3, tmp_path)
    assert smol.policy.engine == "pool" and smol.seed == 3 and smol.checkpoint_every == 5
    assert verdict.job_overrides(args_for("tiny", [])) == verdict.COMMON  # the runs already made are the same jobs
    assert verdict.config(args_for("tiny", []), 0, tmp_path).policy.engine == "hf"


def test_the_users_overrides_come_after_the_settings():
    overrides = verdict.job_overrides(args_for("smol", ["policy.engine=hf", "policy.device=cuda"]))
    assert overrides.index("policy.engine=pool") < overrides.index("policy.engine=hf")
    assert overrides[:len(verdict.COMMON)] == verdict.COMMON and overrides[-1] == "policy.device=cuda"
