"""OpenAIPolicy against a scripted local server: retries, timeouts, bad bodies, missing
logprobs, server down -- each either recovers or becomes one clear error / infra_error."""

from __future__ import annotations

import socket
import time

import pytest

import agentgym
from agentgym.errors import ConfigError
from agentgym.policies.base import SamplingParams
from agentgym.policies.openai_compat import MissingLogprobsError, OpenAIPolicy
from agentgym.toy import COUNTER_ID, CounterTaskSpace, register_counter

register_counter()
CHAT = [{"role": "user", "content": "count to 1"}]
FAST = dict(backoff_base=0.01, backoff_max=0.05, timeout=2.0)


def _policy(url, **kwargs):
    return OpenAIPolicy(url, "tiny", **{**FAST, **kwargs})


def test_a_plain_answer_with_logprobs_and_ids(scripted_server):
    with _policy(scripted_server.url("plain", "ok"), logprobs=True) as policy:
        [c] = policy.generate([CHAT], SamplingParams(temperature=0.7, max_new_tokens=5, seed=1))
    assert c.error is None and c.text == "<action>inc</action>" and c.finish_reason == "stop"
    assert c.response_logprobs == [-0.25, -0.5] and c.response_ids == [7, 9]  # from "token_id:N" entries
    body = scripted_server.bodies[-1]
    assert body["logprobs"] is True and body["max_tokens"] == 5 and body["temperature"] == 0.7
    assert "return_token_ids" not in body  # a vLLM extension, off unless asked for


@pytest.mark.parametrize("script", ["429,429,ok", "500,503,ok", "truncated,ok", "429,truncated,500,ok"])
def test_transient_failures_are_retried_then_succeed(scripted_server, script):
    key = "retry" + script.replace(",", "-")
    with _policy(scripted_server.url(key, script), max_retries=4) as policy:
        [c] = policy.generate([CHAT])
    assert c.error is None and c.text == "<action>inc</action>"
    assert scripted_server.counts[key] == len(script.split(","))
    assert policy.stats["retries"] == len(script.split(",")) - 1


def test_a_hanging_request_times_out_and_is_retried(scripted_server):
    with _policy(scripted_server.url("hang1", "hang,ok"), timeout=0.5, max_retries=2) as policy:
        t0 = time.perf_counter()
        [c] = policy.generate([CHAT])
    assert c.error is None and scripted_server.counts["hang1"] == 2
    assert time.perf_counter() - t0 < 2.5  # did not wait for the 3 s answer


def test_retries_exhausted_give_an_error_completion_naming_the_cause(scripted_server):
    with _policy(scripted_server.url("dead500", "500"), max_retries=2) as policy:
        [c] = policy.generate([CHAT])
    assert c.finish_reason == "error" and "failed after 3 attempts" in c.error and "HTTP 500" in c.error
    assert scripted_server.counts["dead500"] == 3
    with _policy(scripted_server.url("hang2", "hang"), timeout=0.3, max_retries=1) as policy:
        [c] = policy.generate([CHAT])
    assert "timed out" in c.error


@pytest.mark.parametrize("script,needle", [("400", "HTTP 400"), ("empty", "no choices")])
def test_permanent_errors_are_not_retried(scripted_server, script, needle):
    key = "perm" + script
    with _policy(scripted_server.url(key, script), max_retries=4) as policy:
        [c] = policy.generate([CHAT])
    assert needle in c.error and scripted_server.counts[key] == 1


def test_truncated_reply_keeps_finish_reason_length(scripted_server):
    with _policy(scripted_server.url("len", "length"), logprobs=True) as policy:
        [c] = policy.generate([CHAT])
    assert c.error is None and c.finish_reason == "length" and c.response_logprobs == [-0.25, -0.5]


def test_missing_logprobs_when_required_is_one_clear_error(scripted_server):
    with _policy(scripted_server.url("nolp", "nologprobs"), logprobs=True) as policy:
        with pytest.raises(MissingLogprobsError, match="returned no logprobs"):
            policy.generate([CHAT])
    with _policy(scripted_server.url("nolp2", "nologprobs")) as policy:  # evaluation: logprobs not needed
        [c] = policy.generate([CHAT])
    assert c.error is None and c.response_logprobs is None


def test_concurrency_limit_and_per_row_seeds(scripted_server):
    with _policy(scripted_server.url("conc", "slow"), max_concurrency=2) as policy:
        out = policy.generate([CHAT] * 6, SamplingParams(seed=3))
    assert all(c.error is None for c in out) and scripted_server.counts["conc"] == 6
    assert scripted_server.max_inflight["conc"] == 2
    seeds = [b["seed"] for b in scripted_server.bodies[-6:]]
    assert len(set(seeds)) == 6  # a group of copies of one prompt gets distinct seeds


def test_server_down_marks_the_episodes_infra_error_not_zero_reward():
    with socket.socket() as s:  # a port nobody listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tasks = CounterTaskSpace().split("train")[:2]
    with _policy(f"http://127.0.0.1:{port}/v1", max_retries=2) as policy:
        trajs = agentgym.collect(COUNTER_ID, tasks, policy, group_size=2, seed=0)
    assert len(trajs) == 4
    for t in trajs:
        assert t.infra_error and "connection failed" in t.error and "failed after 3 attempts" in t.error
def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="http"):
        OpenAIPolicy("127.0.0.1:8000/v1", "m")
    with pytest.raises(ConfigError, match="max_concurrency"):
        OpenAIPolicy("http://127.0.0.1:1/v1", "m", max_concurrency=0)
