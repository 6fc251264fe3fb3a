"""Issue 52, item 4: at their default coefficients RLVMR's meta rewards paid more for gaming the
tags (an invalid action then a "reflection", over and over: 15.0 per episode; idle "exploring"
padding: 21.6) than for solving (6.6). The tag rewards now only move credit between an episode's
steps (round 5: tests/rewards/test_round5_rewards.py), so no failing episode, whatever its tags,
out-earns a success."""

import random
import sys
from pathlib import Path

import pytest

from agentgym.errors import ConfigError
from agentgym.rewards.hook import reward_hook
from agentgym.rewards.meta_reasoning import MetaReasoningConfig


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness.hostile_round4_graders import (honest_solver, idle_explorer, meta_episode as episode,  # noqa: E402
                                    meta_return as episode_return, reflection_gamer)


def test_gaming_policies_earn_less_than_a_solver_at_the_defaults():
    solver = episode_return(episode(honest_solver(), success=True))
    for gamer in (reflection_gamer(), idle_explorer(), reflection_gamer(60)):
        assert episode_return(episode(gamer, success=False)) < 1.0 <= solver


def test_no_failing_episode_earns_a_success_whatever_its_tags():
    """The class: for any tags, actions, validity and states, a failing episode's return stays
    below the success reward, at the defaults and at any legal coefficients."""
    rng = random.Random(0)
    tags = ["planning", "explore", "reflection", "monitor"]
    for trial in range(300):
        cfg = MetaReasoningConfig(planning=rng.uniform(0, 5), explore=rng.uniform(0, 5), reflection=rng.uniform(0, 5),
                                  weight=rng.uniform(0, 10), episode_cap=rng.uniform(0, 0.99)) if trial % 2 else None
        steps = [(rng.choice(tags), f"a{rng.randrange(8)}", rng.random() < 0.6, f"s{rng.randrange(12)}")
                 for _ in range(rng.randrange(1, 60))]
        assert episode_return(episode(steps, success=False), cfg) < 1.0


def test_the_cap_must_stay_below_the_success_reward():
    with pytest.raises(ConfigError, match="episode_cap=1.5 must be below success_reward"):
        MetaReasoningConfig(episode_cap=1.5)
    with pytest.raises(ConfigError, match="episode_cap"):
        reward_hook({"kind": "meta_reasoning", "episode_cap": 2})
    MetaReasoningConfig(episode_cap=5, success_reward=10)  # an env that pays 10 for a success
