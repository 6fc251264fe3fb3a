"""Any string is a legal action: bad input never raises, is marked invalid, explains itself and
leaves the state (hence the anchor) alone."""

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.envs.household.commands import GRAMMAR, lookup
from agentgym.envs.household.env import HouseholdEnv

SPACE = HouseholdEnv.task_space
TASKS = SPACE.split("train")[:12] + SPACE.split("heldout_unseen")[:6]
# Well-formed commands naming things that are not there or not possible now.
NEAR_MISSES = [
    "go to moon 1", "open countertop 1", "take apple 99 from countertop 1", "move nothing to nowhere",
    "heat apple 1 with fridge 1", "clean", "use", "take", "go to", "examine unicorn 3",
]

actions = st.one_of(
    st.text(max_size=200),
    st.just(""),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31), max_size=50),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80),
    st.builds(lambda c, n: c * n, st.characters(blacklist_categories=("Cs",)), st.integers(100_000, 100_100)),
    st.sampled_from(NEAR_MISSES),
)


def _in_progress_env(k: int, depth: int) -> tuple[HouseholdEnv, dict]:
    """An env part-way through the oracle plan of a task, so bad input meets varied states."""
    env = HouseholdEnv()
    task = TASKS[k % len(TASKS)]
    _, info = env.reset(options={"task": task})
    plan = SPACE.solve(task)
    for action in plan[: min(depth, len(plan) - 1)]:
        *_, info = env.step(action)
    return env, info


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=actions, k=st.integers(0, 100), depth=st.integers(0, 6))
def test_bad_actions_never_raise_and_change_nothing(action, k, depth):
    env, before = _in_progress_env(k, depth)
    if lookup(env._entry, env.world, action)[0] is not None:
        return  # hypothesis wrote a real command ("LOOK.", say): not bad input
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["action_valid"] is False
    assert obs.startswith("Nothing happens.")
    if obs != "Nothing happens.":  # text that is no command at all gets the grammar as a hint
        assert GRAMMAR in obs
    assert info["anchor"] == before["anchor"]
    assert info["admissible_actions"] == before["admissible_actions"]
    assert reward == 0.0 and not terminated and not truncated
    assert len(obs) < 400  # never echoes a 100 kB action back


def test_garbage_gets_the_grammar_and_near_misses_get_alfworld_wording():
    env, _ = _in_progress_env(0, 0)
    assert GRAMMAR in env.step("\x00\x07 ☃ dance")[0]
    assert GRAMMAR in env.step("")[0]
    for action in NEAR_MISSES:
        assert env.step(action)[0] == "Nothing happens."


def test_non_string_actions_through_gym_make():
    env = gym.make("agentgym/Household-v0", disable_env_checker=True)
    _, before = env.reset(options={"task": TASKS[0]})
    for action in (None, 42, b"look"):
        obs, _, _, _, info = env.step(action)
        assert info["anchor"] == before["anchor"] and isinstance(obs, str)
