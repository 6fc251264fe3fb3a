"""An agent framework users actually use, unmodified apart from its base URL: smolagents'
ToolCallingAgent over the gateway (OpenAI's chat completions with tools), a tool-calling turn and
the final answer, every call recorded in the episode.

smolagents is the lightest of the three the issue names: a 160 kB wheel whose dependencies
(huggingface-hub, requests, rich, jinja2, pillow, python-dotenv) the project already has; the
OpenAI Agents SDK pins websockets<17 (ours: 17) and uses the Responses API by default; LangGraph
needs langchain-core + langchain-openai (+ tiktoken)."""

from __future__ import annotations

import httpx
import pytest

smolagents = pytest.importorskip("smolagents")

from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway  # noqa: E402
from agentgym.integrations.gateway.recorder import Recorder  # noqa: E402

from .test_gateway_openai import ScriptedReplies  # noqa: E402


def test_smolagents_tool_calling_agent_through_the_gateway(policy):
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name
        """
        return "sunny" if city == "Paris" else "rain"

    replies = ['<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
               '<tool_call>{"name": "final_answer", "arguments": {"answer": "sunny"}}</tool_call>']
    recorder = Recorder(ScriptedReplies(policy, replies), model_names=("tiny",), default_max_tokens=64)
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        ep = httpx.post(gateway.url + "/episodes", json={"group": "weather"}).json()
        model = OpenAIServerModel(model_id="tiny", api_base=ep["base_url"], api_key="unused")
        agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=3, verbosity_level=0)
        assert agent.run("What is the weather in Paris?") == "sunny"
        episode = recorder.episodes[ep["id"]]
        assert len(episode.calls) == 2
        assert "get_weather" in policy.tokenizer.decode(episode.calls[0].prompt_ids)
        assert "sunny" in policy.tokenizer.decode(episode.calls[1].prompt_ids)  # the tool's result came back
        # smolagents re-sends its memory in its own words (the call as text, the result as a user
        # message): the gateway sees a changed history and starts a new sample, counted
        assert episode.calls[1].sample == episode.splits
        done = httpx.post(gateway.url + f"/episodes/{ep['id']}/reward", json={"reward": 1.0})
        assert done.status_code == 200
