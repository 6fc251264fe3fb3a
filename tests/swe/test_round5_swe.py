"""Round 5 of the hostile runs (issue 67, items 11-12; issue 69, item 1) on the SWE env: what of the
project the sandbox can see wherever the project lives, and patch similarity paying for deleting
the buggy line."""

import json
import sys
from pathlib import Path

import pytest

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.repos import repo_path
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.tools import format_call
from agentgym.rewards.patch import file_patch, patch_similarity

SPACE = SWETaskSpace()
SPLITS = ("train", "heldout", "heldout_unseen")


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
        for task in (SPACE.split("train")[0], SPACE.split("heldout_unseen")[0]):
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
