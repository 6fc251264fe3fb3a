"""The gateway over the vLLM engine: the openai client's calls recorded and continued token for token."""

from __future__ import annotations

import httpx
import pytest

openai = pytest.importorskip("openai")


@pytest.fixture
def one_torch_thread():
    """The trainer's torch_threads=1 (an earlier test in the same process sets it too): the
    gateway's server threads then differ from the main thread's OpenMP count, which vLLM's CPU
    attention refused ("thread_num == thread_num (2 vs. 1)") until the engine aligned them."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_gateway_over_vllm_continues_calls_token_for_token(one_torch_thread, engine):
    from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway
    from agentgym.integrations.gateway.recorder import Recorder

    recorder = Recorder(engine, model_names=("tiny",), context_len=256, default_max_tokens=6)
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        ep = httpx.post(gateway.url + "/episodes", json={}).json()
        client = openai.OpenAI(base_url=ep["base_url"], api_key="unused", max_retries=0)
        messages = [{"role": "user", "content": "open the fridge"}]
        first = client.chat.completions.create(model="tiny", messages=messages, seed=0, logprobs=True)
        messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "look"}]
        client.chat.completions.create(model="tiny", messages=messages, seed=0)
        a, b = recorder.episodes[ep["id"]].calls
        assert [c.logprob for c in first.choices[0].logprobs.content] == a.response_logprobs
        assert b.prompt_ids[:len(a.prompt_ids) + len(a.response_ids)] == a.prompt_ids + a.response_ids
        assert recorder.episodes[ep["id"]].splits == 0
