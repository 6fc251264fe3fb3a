"""scripts/freeze_worktree.sh: a frozen copy whose every agentgym package imports from the copy."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_a_frozen_worktree_imports_its_own_code(tmp_path):
    frozen = tmp_path / "frozen"
    run = subprocess.run(["bash", str(ROOT / "scripts" / "freeze_worktree.sh"), str(frozen), "HEAD"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    try:
        assert run.returncode == 0, run.stderr + run.stdout
        # the script's own check passed; a package from the live checkout would have failed it
        assert f"run with PYTHONPATH={frozen.resolve()}" in run.stdout
        for sub in ("envs", "policies", "trainers", "tasks"):
            assert (frozen / "agentgym" / sub / "__init__.py").is_file()
        again = subprocess.run(["bash", str(ROOT / "scripts" / "freeze_worktree.sh"), str(frozen)],
                               capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        assert again.returncode == 2 and "exists" in again.stderr
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(frozen)], capture_output=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)
