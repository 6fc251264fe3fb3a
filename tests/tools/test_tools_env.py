"""The environment contract: check_env, determinism, info keys, tool specs, action formats."""

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core import INFO_KEYS
from agentgym.envs.tools.env import ToolUseEnv
from agentgym.envs.tools.env import tool_call as act



def test_check_env_passes_on_registered_id():
    env = gym.make("agentgym/ToolUse-v0")
    check_env(env.unwrapped, skip_render_check=True)
    assert env.spec.max_episode_steps == 20
    env.close()


def test_same_task_same_initial_state_and_anchor(env, spec):
    task = spec("reschedule_meetings", 3, seed=11)
    obs1, info1 = env.reset(seed=1, options={"task": task})
    state1 = json.dumps(env.state, sort_keys=True)
    obs2, info2 = ToolUseEnv().reset(seed=99, options={"task": task})
    assert obs1 == obs2 and info1 == info2
    env.reset(options={"task": task})
    assert json.dumps(env.state, sort_keys=True) == state1


def test_different_seeds_give_different_worlds(env, spec):
    _, a = env.reset(options={"task": spec("pay_requests", 1, seed=1)})
    _, b = env.reset(options={"task": spec("pay_requests", 1, seed=2)})
    assert a["anchor"] != b["anchor"] and a["instruction"] != b["instruction"]


def test_info_keys_and_sparse_reward(env, spec):
    task = spec("archive_downloads", 1, seed=3)
    obs, info = env.reset(options={"task": task})
    assert set(INFO_KEYS) <= set(info) and info["admissible_actions"] is None
    plan = env.task_space.solve(task)
    rewards = []
    for a in plan:
        _, r, term, trunc, info = env.step(a)
        assert set(INFO_KEYS) <= set(info)
        rewards.append(r)
    assert rewards[:-1] == [0.0] * (len(plan) - 1) and rewards[-1] == 1.0
    assert term and info["success"] and info["score"] == 1.0


def test_success_needs_finish_even_when_state_is_right(env, spec, play):
    task = spec("archive_downloads", 1, seed=3)
    _, _, term, _, info = play(env, task, env.task_space.solve(task)[:-1])
    assert not term and info["progress"] == 1.0
    assert info["success"] is False and info["score"] == 0.0


def test_anchor_is_a_function_of_state(env, spec):
    task = spec("update_phones", 1, seed=5)
    _, info0 = env.reset(options={"task": task})
    _, _, _, _, info1 = env.step(act("search_contacts", query="a"))  # reading changes nothing
    assert info1["anchor"] == info0["anchor"]
    _, _, _, _, info2 = env.step(act("add_shopping_item", name="kiwis"))
    assert info2["anchor"] != info0["anchor"]
    item = next(i["id"] for i in env.state["shopping"].values() if i["name"] == "kiwis")
    _, _, _, _, info3 = env.step(act("remove_shopping_item", item_id=item))
    assert info3["anchor"] == info0["anchor"]  # ids are reused, so undoing restores the state exactly


def test_tools_are_openai_function_specs():
    tools = ToolUseEnv.tools
    names = {t["function"]["name"] for t in tools}
    assert {"send_email", "create_event", "send_payment", "add_shopping_item", "write_file", "add_contact",
            "finish"} <= names
    for t in tools:
        assert t["type"] == "function"
        f = t["function"]
        assert f["description"] and f["parameters"]["type"] == "object"
        assert set(f["parameters"]["required"]) <= set(f["parameters"]["properties"])
        assert f["name"] in ToolUseEnv.rules


@pytest.mark.parametrize("wrap", [
    lambda a: a,
    lambda a: f"I'll look it up.\n<action>{a}</action>",
    lambda a: f"<tool_call>{a}</tool_call>",
    lambda a: json.dumps({"name": json.loads(a)["name"], "arguments": json.dumps(json.loads(a)["arguments"])}),
])
def test_action_formats_are_accepted(env, wrap, spec):
    env.reset(options={"task": spec("pay_requests", 1, seed=0)})
    obs, _, _, _, info = env.step(wrap(act("get_balance")))
    assert info["action_valid"] and obs.startswith("get_balance -> {\"balance\"")


def test_a_list_of_calls_runs_in_order_and_stops_at_the_first_failure(env, spec):
    env.reset(options={"task": spec("pay_requests", 1, seed=0)})
    calls = [{"name": "add_shopping_item", "arguments": {"name": "figs"}},
             {"name": "get_contact", "arguments": {"contact_id": "c999"}},
             {"name": "add_shopping_item", "arguments": {"name": "dates"}}]
    obs, _, _, _, info = env.step(json.dumps(calls))
    names = [i["name"] for i in env.state["shopping"].values()]
    assert "figs" in names and "dates" not in names
    assert not info["action_valid"] and "no contact with id 'c999'" in obs and "not run: add_shopping_item" in obs


def test_schema_error_in_a_list_runs_nothing(env, spec):
    _, info0 = env.reset(options={"task": spec("pay_requests", 1, seed=0)})
    calls = [{"name": "add_shopping_item", "arguments": {"name": "figs"}},
             {"name": "add_shopping_item", "arguments": {"name": "dates", "quantity": "two"}}]
    obs, _, _, _, info = env.step(json.dumps(calls))
    assert not info["action_valid"] and "nothing was run" in obs and "quantity must be an integer" in obs
    assert info["anchor"] == info0["anchor"]


def test_finish_must_be_last_and_complete_task_is_an_alias(env, spec):
    task = spec("spending_question", 1, seed=2)
    env.reset(options={"task": task})
    obs, _, term, _, info = env.step(json.dumps([{"name": "finish", "arguments": {}},
                                                 {"name": "get_balance", "arguments": {}}]))
    assert not term and not info["action_valid"] and "finish must be the last call" in obs
    answer = json.loads(env.task_space.solve(task)[-1])["arguments"]["answer"]
    _, r, term, _, info = env.step(act("complete_task", answer=f"${answer}"))
    assert term and r == 1.0 and info["success"]


def test_steps_after_the_end_are_invalid_not_errors(env, spec, play):
    task = spec("save_email_to_file", 1, seed=0)
    play(env, task, [act("finish")])
    obs, r, term, _, info = env.step(act("get_balance"))
    assert term and r == 0.0 and not info["action_valid"] and "reset" in obs


def test_unknown_tool_lists_the_available_ones(env, spec):
    env.reset(options={"task": spec("pay_requests", 1, seed=0)})
    obs, _, _, _, info = env.step(act("transfer_money", to="x@y.z", amount=5))
    assert not info["action_valid"] and "unknown tool" in obs and "send_payment" in obs


def test_huge_results_are_truncated(env, spec):
    env.reset(options={"task": spec("pay_requests", 1, seed=0)})
    for i in range(3):
        env.step(act("write_file", path=f"/big/{i}.txt", content="x" * 9000))
    obs, _, _, _, info = env.step(act("list_files"))
    assert info["action_valid"]
    obs, _, _, _, _ = env.step(json.dumps([{"name": "read_file", "arguments": {"path": f"/big/{i}.txt"}}
                                           for i in range(3)]))
    assert "truncated" in obs and len(obs) < 3 * 7000


def test_chat_env_with_json_parser_and_oracle_policy_solves_tasks(space):
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.rollout import collect

    tasks = space.split("train")[:6]
    trajs = collect("ToolUse-v0", tasks, OraclePolicy(space), group_size=1, chat={"parser": "json"})
    assert [t.success for t in trajs] == [True] * len(tasks)
    assert all(s.action_valid for t in trajs for s in t.steps)


@pytest.mark.slow
def test_process_executor_gives_the_same_trajectories(space):
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.rollout import collect

    tasks = space.split("heldout_unseen")[:4]
    runs = [collect("ToolUse-v0", tasks, OraclePolicy(space), group_size=2, executor=ex, chat={"parser": "json"})
            for ex in ("inprocess", "process")]
    for a, b in zip(*runs):
        assert a.success and b.success
        assert [s.anchor for s in a.steps] == [s.anchor for s in b.steps]
