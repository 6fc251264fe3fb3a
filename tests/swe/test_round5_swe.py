"""Round 5 of the hostile runs (issue 67, items 11-12; issue 69, item 1) on the SWE env: what of the
project the sandbox can see wherever the project lives, and patch similarity paying for deleting
the buggy line."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.envs.swe import sandbox_bwrap
from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.repos import repo_path
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.tools import format_call
from agentgym.rewards.patch import file_patch, patch_similarity

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness import hostile_round5_swe as round5  # noqa: E402

SPACE = SWETaskSpace()
SPLITS = ("train", "heldout", "heldout_unseen")


# --- item 11 (and issue 69, item 1): what of the project the sandbox shows ------------------------

def _probe(tmp_path, layout: str) -> dict:
    report = round5.swe_checkout_probe(tmp_path, layout)
    (episode,) = report["episodes"]
    assert episode["installed_at"].startswith(report["checkout"] + "/"), "the probe must import the checkout"
    assert episode["oracle_success"], "grading must work in this install (else 'not solved' proves nothing)"
    return episode


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_checkout_inside_the_venv_shows_neither_its_files_nor_its_git_history(tmp_path):
    """Round 5, item 11: the project installed editable from <venv>/src/agentgym-credit (as
    `pip install -e git+URL` lays it out); the sandbox bound the whole venv, so the agent found the
    checkout's .git and ran `git show HEAD:envs/swe/data/repos/<repo>/<file>`: 6 of 6 solved.

    The searching agent of the round-4 probe, which also asks every git repository it finds for the
    answer's blob, finds nothing of the project and does not solve the task."""
    episode = _probe(tmp_path, "checkout-in-venv")
    assert episode["found"] == [], episode["found"]
    assert not episode["success"] and episode["reward"] == 0.0


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_probe_from_a_clone_named_agentgym_finds_nothing(tmp_path):
    """Round 5, item 11 (issue 69, item 1): the suite in a clone named `agentgym` under the temp
    folder failed the SWE probe with 91 paths "found", all under the clone's .venv: the probe's
    pattern `*/agentgym/*` took the clone's folder for the package.

    Run from a git clone named `agentgym` with its venv inside (as `scripts/setup.sh` makes it) and
    the clone installed editable: the probe reports only copies of the project (none; the
    editable install's hooks, which name the clone's folders, are hidden too)."""
    episode = _probe(tmp_path, "clone-named-agentgym")
    assert episode["found"] == [], episode["found"]
    assert not episode["success"] and episode["reward"] == 0.0


def test_a_checkout_an_install_record_names_is_hidden_whole_git_history_included(tmp_path):
    """Round 5, item 11: every copy of the project under a bound root is hidden, not only the
    imported one: the checkout another interpreter's install records (direct_url.json of a
    `pip install -e`, an editable install's finder), and for a git worktree its repository."""
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    checkouts = {}
    for name in ("direct", "finder", "worktree", "main"):
        root = tmp_path / "src" / name
        (root / "envs" / "swe" / "data" / "repos").mkdir(parents=True)
        (root / "pyproject.toml").write_text("[project]\nname = 'agentgym-credit'\n")
        checkouts[name] = str(root.resolve())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    main = tmp_path / "src" / "main"
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(git + ["-C", str(main)] + args, check=True, capture_output=True)
    worktree = tmp_path / "src" / "worktree"
    os.rename(worktree, tmp_path / "worktree.tmp")  # `git worktree add` wants the folder absent
    subprocess.run(git + ["-C", str(main), "worktree", "add", "-q", str(worktree)], check=True, capture_output=True)
    dist = site / "agentgym_credit-0.1.0.dist-info"
    dist.mkdir()
    (dist / "direct_url.json").write_text('{"dir_info": {"editable": true}, "url": "file://%s"}' % checkouts["direct"])
    (site / "__editable___agentgym_credit_0_1_0_finder.py").write_text(
        "MAPPING: dict[str, str] = {'agentgym': '%s/agentgym', 'agentgym.envs': '%s/envs'}\n"
        % (checkouts["finder"], checkouts["finder"]))
    (site / "__editable__.agentgym_credit-0.1.0.pth").write_text("%s\n" % checkouts["worktree"])

    hidden = sandbox_bwrap.agentgym_folders([str(tmp_path.resolve())])
    for name, root in checkouts.items():
        assert root in hidden, (name, hidden)  # the worktree's repository ("main") with its .git


def test_the_checkout_holding_the_imported_package_is_hidden_but_the_interpreter():
    """Round 5, item 11: where the imported package lives in a checkout under a bound root (here:
    as if the whole filesystem were bound), its .git and every other entry are hidden; a venv inside
    the checkout keeps only what python needs."""
    import agentgym

    root = Path(agentgym.__file__).resolve().parents[1]
    if not (root / "pyproject.toml").exists():
        pytest.skip("agentgym is not imported from a checkout here")
    hidden = sandbox_bwrap.agentgym_folders(["/"])
    binds = sandbox_bwrap.python_binds()
    for entry in root.iterdir():
        path = str(entry)
        if entry.is_symlink() or any(b == path or b.startswith(path + "/") for b in binds):
            continue
        assert any(path == h or path.startswith(h + "/") for h in hidden), (path, hidden)
    assert not any(b == h or b.startswith(h + "/") for b in binds for h in hidden)


# --- item 12: patch similarity --------------------------------------------------------------------

def _deleted(task) -> tuple[str, str]:
    """(the patch that deletes the buggy line, the reference fix), both against the buggy file."""
    p = task.params
    fixed = (repo_path(p["repo"]) / p["file"]).read_text()
    buggy = fixed.replace(p["before"], p["after"], 1)
    deleted = buggy.replace(p["after"] + "\n", "", 1)
    assert deleted != buggy
    return (file_patch(p["file"], buggy.encode(), deleted.encode()),
            file_patch(p["file"], buggy.encode(), fixed.encode()))


def test_deleting_the_buggy_line_earns_little_on_every_task():
    """Round 5, item 12: deleting the buggy line scored 0.925 on average (81% of tasks >= 0.9).

    On every bundled task of the three splits, against the reference fix: the deletion scores at
    most about half (the fixes that only delete tokens, `not (...)` -> `...`, share the deletion's
    removed tokens and nothing else), and 0.05 on average; the fix itself scores 1."""
    scores = []
    for split in SPLITS:
        for task in SPACE.split(split):
            deletion, reference = _deleted(task)
            assert patch_similarity(reference, reference).score == 1.0
            scores.append(patch_similarity(deletion, reference).score)
    assert len(scores) >= 200
    assert max(scores) < 0.6, max(scores)
    assert sum(scores) / len(scores) < 0.1, sum(scores) / len(scores)
    assert sum(s >= 0.5 for s in scores) / len(scores) < 0.05


@pytest.mark.sandbox
def test_deleting_the_buggy_line_in_the_env_scores_well_below_the_fix():
    """Round 5, item 12: through SWE-v0 with env.reward=both, the deletion fails the tests and its
    similarity is far below the honest fix's, which passes them and scores 1."""
    with SWEEnv(reward="both") as env:
        for task in (SPACE.split("heldout_unseen")[0],):
            p = task.params
            for actions, honest in ((SPACE.solve(task), True),
                                    ([format_call("str_replace", path=p["file"], old_str=p["after"] + "\n",
                                                  new_str=""), format_call("submit")], False)):
                env.reset(options={"task": task})
                for action in actions:
                    *_, info = env.step(action)
                assert info["success"] is honest, (task.task_id, honest)
                if honest:
                    assert info["patch_similarity"] == 1.0
                else:
                    assert 0.0 <= info["patch_similarity"] < 0.3, (task.task_id, info["patch_similarity"])
