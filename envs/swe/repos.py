"""The small Python projects shipped with the package (envs/swe/data/repos/<name>/).

Each project has its package, a visible test suite in `tests/` (copied into the agent's
workspace) and a hidden one in `hidden_tests/` (only ever copied into the grading sandbox).
Train and held-out-unseen projects are disjoint: `heldout_unseen` tasks come from projects the
agent never sees during training.
"""

from __future__ import annotations

from pathlib import Path

from agentgym.errors import ConfigError

REPO_ROOT = Path(__file__).parent / "data" / "repos"
VISIBLE_TESTS = "tests"
HIDDEN_TESTS = "hidden_tests"
TRAIN_REPOS = (
    "datekit", "graphkit", "heapkit", "inikit", "lexkit",
    "lrukit", "matrixkit", "moneykit", "romankit", "wrapkit",
)
UNSEEN_REPOS = ("diffkit", "jpathkit", "unitkit")
ALL_REPOS = TRAIN_REPOS + UNSEEN_REPOS


def repo_path(name: str) -> Path:
    path = REPO_ROOT / name
    if name not in ALL_REPOS or not path.is_dir():
        raise ConfigError(f"unknown SWE project {name!r}; choose one of {', '.join(ALL_REPOS)}")
    return path


def source_files(name: str) -> list[str]:
    """The project's library modules (the files bugs are injected into), relative paths."""
    root = repo_path(name)
    pkg = root / name
    return sorted(str(p.relative_to(root)) for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)
