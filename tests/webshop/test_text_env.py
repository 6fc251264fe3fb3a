"""The text backend: Gymnasium contract, oracle, bad input."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core import INFO_KEYS
from agentgym.envs.webshop.env import WebShopEnv
from agentgym.envs.webshop.goal import Goal
from agentgym.envs.webshop.pages import MAX_QUERY_CHARS
from agentgym.envs.webshop.tasks import WebShopTaskSpace

SPACE = WebShopTaskSpace()


@pytest.fixture(scope="module")
def env():
    env = WebShopEnv()
    yield env
    env.close()


def play(env, task, actions):
    obs, info = env.reset(options={"task": task})
    out = [(obs, 0.0, info)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, reward, info))
        if terminated or truncated:
            break
    return out


def test_check_env_passes():
    env = gym.make("agentgym/WebShop-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_registered_with_webshop_step_limit():
    env = gym.make("agentgym/WebShop-v0")
    assert env.spec.max_episode_steps == 15
    env.reset(seed=0)
    for i in range(15):
        _, _, terminated, truncated, _ = env.step("click[Back to Search]")
    assert truncated and not terminated
    env.close()


def test_oracle_reaches_full_reward_on_500_sampled_tasks(env):
    rng = np.random.default_rng(123)
    tasks = [SPACE.sample(rng) for _ in range(400)]
    tasks += [SPACE.sample(rng, categories=("fragrance", "garden", "baby", "office supplies")) for _ in range(100)]
    for task in tasks:
        plan = SPACE.solve(task)
        assert plan is not None and len(plan) <= 15
        obs, reward, info = play(env, task, plan)[-1]
        assert reward == 1.0 and info["success"] and info["score"] == 1.0, (task.task_id, plan, obs)


def test_oracle_solves_every_shipped_split_task(env):
    for name in SPACE.split_names:
        for task in SPACE.split(name):
            _, reward, info = play(env, task, SPACE.solve(task))[-1]
            assert info["success"], (name, task.task_id)


def test_progress_rises_along_the_oracle_plan(env):
    task = SPACE.split("train")[11]
    progress = [info["progress"] for _, _, info in play(env, task, SPACE.solve(task))]
    assert progress[0] == 0.0 and progress[-1] == 1.0
    assert progress == sorted(progress) and all(0.0 <= p <= 1.0 for p in progress)


def test_reward_is_sparse_and_partial_for_a_wrong_purchase(env):
    task = SPACE.split("train")[5]
    plan = SPACE.solve(task)
    # Buy the right product without choosing its options: partial credit, no success.
    steps = play(env, task, [a for a in plan if a.startswith(("search", "click[B0")) or a == "click[Buy Now]"])
    assert all(r == 0.0 for _, r, _ in steps[:-1])
    obs, reward, info = steps[-1]
    if task.params["options"]:
        assert 0 < reward < 1 and not info["success"] and info["score"] == reward
        assert f"{reward:.4f}" in obs


def test_every_admissible_action_is_valid_and_pages_are_deterministic(env):
    rng = np.random.default_rng(0)
    for task in SPACE.split("heldout")[:20]:
        obs, info = env.reset(options={"task": task})
        obs2, info2 = env.reset(options={"task": task})
        assert obs == obs2 and info == info2
        for _ in range(12):
            actions = info["admissible_actions"]
            if not actions:
                break
            action = actions[int(rng.integers(len(actions)))]
            if action.startswith("search"):
                action = f"search[{task.params['product_type']}]"
            obs, _, terminated, _, info = env.step(action)
            assert info["action_valid"], (action, obs)
            if terminated:
                break


def test_anchor_tracks_the_state_not_the_path(env):
    task = SPACE.split("train")[0]
    query = SPACE.oracle_query(Goal.from_params(task.params))
    _, a_search = env.reset(options={"task": task})
    _, _, _, _, a_results = env.step(f"search[{query}]")
    _, _, _, _, a_next = env.step("click[Next >]")
    _, _, _, _, a_back = env.step("click[< Prev]")
    assert a_results["anchor"] == a_back["anchor"] != a_next["anchor"]
    _, _, _, _, a_invalid = env.step("click[no such thing]")
    assert a_invalid["anchor"] == a_back["anchor"] and not a_invalid["action_valid"]
    # The same results reached with another spelling of the query: the same anchor.
    env.step("click[Back to Search]")
    _, _, _, _, a_again = env.step(f"search[  {query.upper()}  ]")
    assert a_again["anchor"] == a_results["anchor"]
    assert a_search["anchor"] != a_results["anchor"]


@pytest.mark.parametrize("action", [
    "", "   ", "click", "click[]", "click[nothing here]", "search[]", "search[    ]", "search[!!!]",
    "buy now", "click[Buy Now]", "click[Next >]", "search[" + "a" * 10_000 + "]", "search[" + "é" * 10_000 + "]",
    "search[\x00\ud800\u2028\n]", "click[B0" + "0" * 10_000 + "]", "search[shampoo] click[Buy Now]",
    "search[<script>alert(1)</script>]", "SEARCH [shampoo]", "click[\ud83d\ude00]",
])
def test_bad_input_is_invalid_or_harmless(env, action):
    obs, info = env.reset(options={"task": SPACE.split("train")[1]})
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and set(INFO_KEYS) <= set(info)
    assert reward == 0.0 and not terminated and not truncated
    if not info["action_valid"]:
        assert obs.startswith("Invalid action:")
    assert len(obs) < 5_000  # a 10 kB query is cut, never echoed whole


def test_long_query_is_cut_and_shown_once(env):
    env.reset(options={"task": SPACE.split("train")[1]})
    obs, _, _, _, info = env.step("search[shampoo " + "x" * 10_000 + "]")
    assert info["action_valid"] and info["page"] == "results"
    assert ("shampoo " + "x" * (MAX_QUERY_CHARS - 8)) in obs and "x" * (MAX_QUERY_CHARS - 7) not in obs


def test_actions_after_the_purchase_are_invalid(env):
    task = SPACE.split("train")[2]
    play(env, task, SPACE.solve(task))
    obs, reward, terminated, _, info = env.step("click[Back to Search]")
    assert terminated and reward == 0.0 and not info["action_valid"] and info["success"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.text(max_size=60),
    st.builds(lambda s: f"search[{s}]", st.text(max_size=300)),
    st.builds(lambda s: f"click[{s}]", st.text(max_size=30)),
    st.sampled_from(["click[Next >]", "click[< Prev]", "click[Back to Search]", "click[Buy Now]", "click[Features]",
                     "click[Description]", "search[shampoo]", "search[waterproof running shoe]"]),
), max_size=12), st.integers(0, 999))
def test_fuzz_never_raises(env, actions, task_index):
    obs, info = env.reset(options={"task": SPACE.split("train")[task_index]})
    for action in actions:
        # Follow the page sometimes, so fuzzing reaches item pages and purchases too.
        if action == "click[Buy Now]" and info["admissible_actions"]:
            action = info["admissible_actions"][-1]
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and 0.0 <= reward <= 1.0 and 0.0 <= info["score"] <= 1.0
        assert set(INFO_KEYS) <= set(info)
        if terminated:
            break


def test_runs_in_gymnasium_async_vector_env():
    tasks = SPACE.split("train")[:2]
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("agentgym/WebShop-v0")] * 2, shared_memory=False)
    try:
        obs, infos = envs.reset(seed=[0, 1], options={"task": tasks[0]})
        assert len(obs) == 2 and all("Instruction:" in o for o in obs)
        obs, rewards, terminated, truncated, infos = envs.step(["search[shampoo]", "click[nowhere]"])
        assert "Results for: shampoo" in obs[0] and obs[1].startswith("Invalid action:")
        assert list(infos["action_valid"]) == [True, False]
    finally:
        envs.close()
