"""A task space says where its splits come from through the public hook `read_split(name)`;
spaces written against the old private `_splits` keep working, with a deprecation warning."""

from __future__ import annotations

import warnings

import pytest

from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.validation import heldout_ids

ENV = "agentgym/SplitHook-v0"
TRAIN = [TaskSpec(ENV, {"n": i}, seed=0) for i in range(3)]
HELD = [TaskSpec(ENV, {"n": 10 + i}, seed=0) for i in range(2)]


def _hook_space():
    class HookSpace(TaskSpace):
        env_id = ENV
        split_names = ("train", "heldout")
        reads = 0

        def read_split(self, name):
            HookSpace.reads += 1
            return {"train": TRAIN, "heldout": HELD}[name]

    return HookSpace


def test_the_public_hook_feeds_splits_heldout_ids_and_find_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # defining and using a space on the public hook is silent
        space = _hook_space()()
        assert space.split("train") == TRAIN
        assert heldout_ids(space) == {t.task_id for t in HELD}
        assert space.find(HELD[1].task_id) == HELD[1]


def test_the_old_private_override_still_works_and_warns():
    with pytest.warns(DeprecationWarning, match=r"OldSpace overrides TaskSpace._splits.*read_split"):
        class OldSpace(TaskSpace):
            env_id = ENV
            split_names = ("train", "heldout")

            def _splits(self, name):
                return tuple({"train": TRAIN, "heldout": HELD}[name])

    space = OldSpace()
    assert space.split("train") == TRAIN
    assert heldout_ids(space) == {t.task_id for t in HELD}


def test_the_default_hook_reads_the_shipped_manifests():
    from agentgym.registration import get_task_space

    space = get_task_space("agentgym/Household-v0")
    assert list(space.read_split("heldout")) == space.split("heldout") and space.split("heldout")
