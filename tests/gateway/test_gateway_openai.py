"""The gateway driven by the official `openai` client, unmodified apart from base_url: episodes
recorded token for token, continued at the token level across calls, split where the client
changed the past; streaming; a tool-calling turn; OpenAI error objects for bad input."""

from __future__ import annotations

import concurrent.futures
import json

import httpx
import pytest

openai = pytest.importorskip("openai")

from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway  # noqa: E402
from agentgym.integrations.gateway.recorder import Recorder  # noqa: E402
from agentgym.policies.base import Completion  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def open_episode(gateway, group="g") -> dict:
    return httpx.post(gateway.url + "/episodes", json={"group": group}).json()


def client_for(base_url: str, **kwargs):
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, **kwargs)


class ScriptedReplies:
    """The tiny model's tokenizer and chat template with replies the test gives: a stand-in for a
    model trained to call tools (a random tiny model never writes a well-formed call)."""

    def __init__(self, policy, replies):
        self.policy, self.tokenizer, self.eos_ids = policy, policy.tokenizer, policy.eos_ids
        self.replies = list(replies)

    def encode_prompt(self, messages):
        return self.policy.encode_prompt(messages)

    def generate_ids(self, prompt_ids, sampling=None):
        out = []
        for p in prompt_ids:
            text = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            out.append(Completion(text=self.tokenizer.decode(ids, skip_special_tokens=True), prompt_ids=list(p),
                                  response_ids=ids, response_logprobs=[-0.5] * len(ids)))
        return out


def test_calls_are_recorded_and_continued_token_for_token(gateway):
    ep = open_episode(gateway)
    client = client_for(ep["base_url"])
    assert [m.id for m in client.models.list()] == ["tiny"]
    messages = [{"role": "system", "content": "You are in room 2."}, {"role": "user", "content": "go to the kitchen"}]
    first = client.chat.completions.create(model="tiny", messages=messages, max_tokens=6, seed=3, logprobs=True)
    messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "look"}]
    second = client.chat.completions.create(model="tiny", messages=messages, max_tokens=6, seed=3)
    record = httpx.get(gateway.url + f"/episodes/{ep['id']}").json()
    a, b = record["calls"]
    assert a["text"] == first.choices[0].message.content and b["text"] == second.choices[0].message.content
    assert [c.logprob for c in first.choices[0].logprobs.content] == a["response_logprobs"]
    assert first.usage.completion_tokens == len(a["response_ids"]) and first.usage.prompt_tokens == len(a["prompt_ids"])
    # the second prompt is the first prompt + the ids sampled for it + the template's ids after them
    assert b["prompt_ids"][:len(a["prompt_ids"]) + len(a["response_ids"])] == a["prompt_ids"] + a["response_ids"]
    assert record["splits"] == 0 and [c["sample"] for c in record["calls"]] == [0, 0]


def test_a_changed_history_splits_the_episode(gateway):
    ep = open_episode(gateway)
    client = client_for(ep["base_url"])
    messages = [{"role": "user", "content": "open the fridge"}]
    reply = client.chat.completions.create(model="tiny", messages=messages, max_tokens=5, seed=1).choices[0].message
    edited = messages + [{"role": "assistant", "content": (reply.content or "") + " edited"},
                         {"role": "user", "content": "look"}]
    client.chat.completions.create(model="tiny", messages=edited, max_tokens=5, seed=1)
    trimmed = [{"role": "user", "content": "look"}]  # a client that drops the history
    client.chat.completions.create(model="tiny", messages=trimmed, max_tokens=5, seed=1)
    record = httpx.get(gateway.url + f"/episodes/{ep['id']}").json()
    assert record["splits"] == 2 and [c["sample"] for c in record["calls"]] == [0, 1, 2]
    first, second = record["calls"][:2]
    assert second["prompt_ids"][:len(first["prompt_ids"]) + len(first["response_ids"])] != \
        first["prompt_ids"] + first["response_ids"]  # re-rendered from the client's text, not merged
    assert httpx.get(gateway.url + "/metrics").json()["splits"] >= 2


def test_streaming_gives_the_recorded_reply(gateway):
    ep = open_episode(gateway)
    client = client_for(ep["base_url"])
    chunks = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "take key"}],
                                                 max_tokens=8, seed=2, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    record = httpx.get(gateway.url + f"/episodes/{ep['id']}").json()
    assert text == record["calls"][0]["text"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].usage.completion_tokens == len(record["calls"][0]["response_ids"])


def test_episode_in_a_header_and_reward_closes_it(gateway):
    ep = open_episode(gateway)
    client = client_for(gateway.url + "/v1", default_headers={"X-Episode-Id": ep["id"]})
    client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "look"}], max_tokens=4)
    done = httpx.post(gateway.url + f"/episodes/{ep['id']}/reward", json={"reward": 1.0, "states": ["room 2"]})
    assert done.status_code == 200 and done.json()["calls"] == 1
    assert "episode-" + ep["id"] not in gateway.recorder.continuation.contexts  # its context was released
    traj = gateway.recorder.trajectory(gateway.recorder.episodes[ep["id"]])
    assert traj.success and traj.score == 1.0 and traj.steps[0].anchor == "room 2"
    with pytest.raises(openai.ConflictError) as closed:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "look"}], max_tokens=4)
    assert closed.value.body["code"] == "episode_closed"


def test_a_tool_calling_turn(policy):
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    recorder = Recorder(ScriptedReplies(policy, [call, "sunny"]), model_names=("tiny",), default_max_tokens=64)
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        ep = open_episode(gateway)
        client = client_for(ep["base_url"])
        messages = [{"role": "user", "content": "the weather in Paris?"}]
        out = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)
        message = out.choices[0].message
        assert out.choices[0].finish_reason == "tool_calls" and message.content is None
        assert message.tool_calls[0].function.name == "get_weather"
        assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Paris"}
        messages += [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "sunny"}]
        final = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)
        assert final.choices[0].message.content == "sunny"
        a, b = recorder.episodes[ep["id"]].calls
        assert b.prompt_ids[:len(a.prompt_ids) + len(a.response_ids)] == a.prompt_ids + a.response_ids  # not split
        assert "get_weather" in policy.tokenizer.decode(a.prompt_ids)  # the tools were rendered into the prompt


def test_tool_choice_none_or_another_function_returns_no_call(policy):
    """tool_choice "none": the tools are not offered in the prompt and a reply that writes a call
    anyway comes back as text; a named function: only that function's calls come back."""
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    other = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    recorder = Recorder(ScriptedReplies(policy, [call]), model_names=("tiny",), default_max_tokens=64)
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        client = client_for(gateway.url + "/v1")
        messages = [{"role": "user", "content": "the weather in Paris?"}]
        for choice in ("none", {"type": "function", "function": {"name": "get_time"}}):
            out = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS + [other],
                                                 tool_choice=choice)
            assert out.choices[0].message.tool_calls is None and out.choices[0].finish_reason == "stop"
            assert out.choices[0].message.content == call
        out = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS + [other],
                                             tool_choice={"type": "function", "function": {"name": "get_weather"}})
        assert out.choices[0].message.tool_calls[0].function.name == "get_weather"


@pytest.mark.parametrize("body,status,code", [
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model_not_found"),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "unsupported_value"),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "logit_bias": {"1": 5}}, 400,
     "unsupported_parameter"),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi " * 600}]}, 400, "context_length_exceeded"),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}, 400,
     "context_length_exceeded"),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "retrieval"}]}, 400, None),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]}, 400, None),
    ({"model": "tiny", "messages": []}, 400, None),
    ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "temperature": 7}, 400, None),
])
def test_bad_requests_get_openai_error_objects(gateway, body, status, code):
    ep = open_episode(gateway)
    url = ep["base_url"] + "/chat/completions"
    good = httpx.post(url, json={"model": "tiny", "messages": [{"role": "user", "content": "look"}], "max_tokens": 3})
    bad = httpx.post(url, json=body)
    assert bad.status_code == status
    error = bad.json()["error"]
    assert error["message"] and error["type"] and error["code"] == code
    # the episode's data is intact and the server still serves
    record = httpx.get(gateway.url + f"/episodes/{ep['id']}").json()
    assert len(record["calls"]) == 1 and record["calls"][0]["text"] == good.json()["choices"][0]["message"]["content"]
    assert httpx.post(url, json={"model": "tiny", "messages": [{"role": "user", "content": "look"}],
                                 "max_tokens": 3}).status_code == 200


def test_malformed_json_unknown_and_closed_episodes(gateway):
    ep = open_episode(gateway)
    r = httpx.post(ep["base_url"] + "/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    client = client_for(gateway.url + "/episodes/nope/v1")
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.body["code"] == "episode_not_found"
    assert httpx.post(gateway.url + f"/episodes/{ep['id']}/reward", json={"reward": "high"}).status_code == 400
    assert httpx.post(gateway.url + f"/episodes/{ep['id']}/reward",
                      json={"reward": 1, "step_rewards": [1, 2]}).status_code == 400  # no call made: 0 step rewards
    assert httpx.post(gateway.url + "/nowhere").json()["error"]["code"] == "unknown_url"


def test_bearer_token(policy):
    recorder = Recorder(policy, model_names=("tiny",), default_max_tokens=3)
    with RunningGateway(recorder, GatewayConfig(port=0, api_key="s3cret")) as gateway:
        with pytest.raises(openai.AuthenticationError):
            client_for(gateway.url + "/v1").models.list()
        ok = openai.OpenAI(base_url=gateway.url + "/v1", api_key="s3cret", max_retries=0)
        assert ok.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}]).choices


def test_non_loopback_needs_allow_remote(policy):
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match="allow-remote"):
        RunningGateway(Recorder(policy), GatewayConfig(host="0.0.0.0", port=0))


def test_a_flood_is_refused_with_429_and_the_server_keeps_serving(policy):
    recorder = Recorder(policy, model_names=("tiny",), default_max_tokens=24)
    with RunningGateway(recorder, GatewayConfig(port=0, max_pending=2, max_batch=1)) as gateway:
        url = gateway.url + "/v1/chat/completions"
        body = {"model": "tiny", "messages": [{"role": "user", "content": "look"}], "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(lambda _: httpx.post(url, json=body, timeout=60).status_code, range(16)))
        assert 200 in codes and 429 in codes and set(codes) <= {200, 429}
        assert httpx.post(url, json=body, timeout=60).status_code == 200


def test_a_client_that_leaves_mid_stream_leaves_the_episode_intact(gateway):
    ep = open_episode(gateway)
    url = ep["base_url"] + "/chat/completions"
    body = {"model": "tiny", "messages": [{"role": "user", "content": "look"}], "max_tokens": 24, "stream": True}
    with httpx.stream("POST", url, json=body) as response:
        next(response.iter_lines())  # one line, then go away
    record = httpx.get(gateway.url + f"/episodes/{ep['id']}").json()
    assert len(record["calls"]) == 1 and len(record["calls"][0]["response_ids"]) >= 1
    again = httpx.post(url, json={**body, "stream": False})
    assert again.status_code == 200


def test_stop_cuts_the_reply_and_its_ids(policy):
    recorder = Recorder(ScriptedReplies(policy, ["go right Observation: room 2"]), model_names=("tiny",))
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        ep = open_episode(gateway)
        client = client_for(ep["base_url"])
        out = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "go"}],
                                             stop=["Observation:"])
        call = recorder.episodes[ep["id"]].calls[0]
        assert out.choices[0].message.content == call.text == "go right "
        assert "Observation:" in policy.tokenizer.decode(call.response_ids)  # sampled up to the stop, kept
        assert "room" not in policy.tokenizer.decode(call.response_ids)  # nothing after it
        assert len(call.response_logprobs) == len(call.response_ids)


def test_concurrent_episodes_are_sampled_one_turn_per_engine_call(policy):
    """Episodes whose programs step at different speeds between calls (0-80 ms here) are sampled
    together, one engine call per turn, as the built-in rollout does; an episode opened and
    abandoned (never called, never closed) is waited for only until idle_s, not for gather_s
    on every turn (30 s here: 3 turns would take 90 s)."""
    import random
    import time

    recorder = Recorder(policy, model_names=("tiny",), default_max_tokens=4)
    with RunningGateway(recorder, GatewayConfig(port=0, gather_s=30.0, idle_s=2.0, max_wait_s=30.0)) as gateway, \
            httpx.Client(timeout=60) as http:
        open_episode(gateway, "abandoned")
        urls = [open_episode(gateway)["base_url"] + "/chat/completions" for _ in range(6)]  # (a batch waits
        started = time.monotonic()  # for the open episodes: one not opened yet cannot be waited for)

        def program(k: int) -> None:
            rng, url = random.Random(k), urls[k]
            for turn in range(3):
                time.sleep(rng.uniform(0, 0.08))  # the program's own work between two calls
                body = {"model": "tiny", "messages": [{"role": "user", "content": f"look {turn}"}]}
                assert http.post(url, json=body).status_code == 200

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            list(pool.map(program, range(6)))
        assert recorder.stats["calls"] == 18
        assert recorder.stats["batches"] == 3
        assert time.monotonic() - started < 20
