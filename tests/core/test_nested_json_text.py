"""Text from a model or a client that holds JSON nested past Python's recursion limit ("[[[[..."
x 100,000, which json.loads answers with RecursionError) is read as text that is not JSON at every
place that parses such text, never a traceback: the tool-call parser, the final answer a guard
reads, the task generator's parse of a model's proposal, and the gateway's tool calls."""

from __future__ import annotations

import json

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a": ' + DEEP + "}"


def test_a_tool_call_whose_arguments_nest_too_deeply_is_an_invalid_call():
    from agentgym.parsing import JSONToolCallParser

    parsed = JSONToolCallParser().parse('<tool_call>{"name": "x", "arguments": %s}</tool_call>' % json.dumps(DEEP))
    assert parsed.action is None and "not valid JSON" in parsed.error
    ok = JSONToolCallParser().parse('<tool_call>{"name": "x", "arguments": "{\\"q\\": 1}"}</tool_call>')
    assert ok.error is None  # a well-formed call still parses


def test_a_final_answer_that_nests_too_deeply_is_read_as_text():
    from agentgym.rewards.guards import final_answer
    from agentgym.trajectory import Step, Trajectory

    traj = Trajectory(task_id="t", group_id="g", steps=[Step(observation="", anchor="", text=DEEP, action=DEEP)])
    assert isinstance(final_answer(traj), str)


def test_a_proposed_task_that_nests_too_deeply_is_no_task():
    from agentgym.registration import get_task_space
    from agentgym.tasks.generation import parse_json

    space = get_task_space("agentgym/Household-v0")
    assert parse_json(space, "Here it is: " + DEEP_OBJECT) is None


def test_the_gateway_reads_deeply_nested_tool_calls_as_text():
    from agentgym.integrations.gateway.chat_format import call_text, parse_reply

    text = call_text([{"function": {"name": "f", "arguments": DEEP}}])  # a client's assistant message
    assert text.startswith("<tool_call>") and "f" in text
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    reply = parse_reply("<tool_call>" + DEEP_OBJECT + "</tool_call>", tools)  # the model's text
    assert reply.tool_calls == [] and DEEP_OBJECT in reply.content
