"""TextEnv's info contract is one TypedDict (`agentgym.StepInfo`): its required keys are the ones
every reset and step is checked for, and a real env's info has them with the declared types."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym
from agentgym.core import INFO_KEYS, StepInfo


def test_the_checked_keys_are_the_typed_dicts_required_ones():
    assert set(INFO_KEYS) == StepInfo.__required_keys__
    assert StepInfo.__optional_keys__ == {"progress"}


def test_household_info_has_the_declared_types():
    env = gym.make("agentgym/Household-v0")
    _, info = env.reset(seed=0)
    assert isinstance(info["task_id"], str) and isinstance(info["instruction"], str)
    assert isinstance(info["admissible_actions"], list) and info["action_valid"] is True
    _, _, _, _, info = env.step("fly to the moon")
    assert info["action_valid"] is False and isinstance(info["score"], float) and isinstance(info["success"], bool)


def test_a_missing_required_key_is_an_environment_bug():
    class Broken(agentgym.TextEnv):
        def _reset(self, task):
            return "", {"task_id": task.task_id}

    env = Broken()
    env.task_space = agentgym.get_task_space("agentgym/Household-v0")
    with pytest.raises(KeyError, match="environment bug"):
        env.reset(seed=0)
