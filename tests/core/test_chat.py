import pytest

import agentgym
from agentgym import ChatEnv
from agentgym.toy import register_counter


@pytest.fixture(scope="module")
def env_id():
    return register_counter()


def _chat(env_id, **kw):
    return ChatEnv(agentgym.make(env_id), **kw)


def test_windowed_prompt_shows_instruction_last_k_turns_and_admissible(env_id):
    env = _chat(env_id, history=1)
    msgs, info = env.reset(options={"task": env.unwrapped.task_space.split("train")[5]})
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "bring the counter to" in msgs[1]["content"] and "Admissible actions: inc, dec" in msgs[1]["content"]
    env.step("<action>inc</action>")
    msgs, *_ = env.step("<action>dec</action>")
    user = msgs[1]["content"]
    assert "Action: dec" in user and "Action: inc" not in user  # window of 1
    assert "step 3" in user


def test_full_history_is_one_growing_conversation(env_id):
    env = _chat(env_id, history="full")
    env.reset(options={"task": env.unwrapped.task_space.split("train")[8]})
    env.step("thinking <action>inc</action>")
    msgs, *_ = env.step("<action>inc</action>")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"] == "thinking <action>inc</action>"


def test_unparseable_reply_is_an_invalid_action_that_costs_a_turn(env_id):
    env = _chat(env_id, invalid_penalty=0.1)
    env.reset(options={"task": env.unwrapped.task_space.split("train")[0]})
    msgs, reward, term, trunc, info = env.step("I will increment")
    assert info["action_valid"] is False and info["parse_error"] and info["action"] is None
    assert reward == pytest.approx(-0.1)
    assert "could not be used" in msgs[1]["content"]
    for _ in range(11):
        *_, term, trunc, info = env.step("garbage")
    assert trunc and not term  # the env's time limit still applies


def test_an_assistant_message_plays_as_its_text(env_id):
    """A chat API's reply is a message dict; passing it as returned was "the reply was not text"."""
    env = _chat(env_id, history="full")
    env.reset(options={"task": env.unwrapped.task_space.split("train")[8]})
    msgs, _, _, _, info = env.step({"role": "assistant", "content": "thinking <action>inc</action>"})
    assert info["action_valid"] is True and info["action"] == "inc"
    assert msgs[2] == {"role": "assistant", "content": "thinking <action>inc</action>"}
    *_, info = env.step({"role": "user", "content": "<action>inc</action>"})  # not the model's reply
    assert info["action_valid"] is False and info["parse_error"]


def test_bad_history_option(env_id):
    with pytest.raises(ValueError):
        _chat(env_id, history=-1)


def test_parser_defaults_to_the_envs_own_format(env_id):
    from agentgym.parsing import JSONToolCallParser, TagActionParser
    assert isinstance(_chat(env_id).parser, TagActionParser)
    env = agentgym.make(env_id)
    env.unwrapped.action_parser = "json"
    assert isinstance(ChatEnv(env).parser, JSONToolCallParser)
