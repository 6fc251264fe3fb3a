"""A tiny Llama from a short corpus (no env rollouts, no downloads) and a gateway over it on a free
loopback port, shared by the tests of this folder."""

from __future__ import annotations

import pytest

CORPUS = [
    "go to the kitchen and take the apple", "open the fridge", "look", "inventory",
    "You see a table, a chair and a lamp.", "take key", "go right", "go left", "You are in room 2.",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', "sunny", "Paris",
] * 10


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from agentgym.policies.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("gateway_tiny") / "model", texts=CORPUS, vocab_size=400,
                            hidden=64, layers=2, heads=2, seed=0)


@pytest.fixture(scope="session")
def policy(tiny_model_dir):
    import torch

    from agentgym.policies.hf import HFPolicy

    torch.set_num_threads(1)
    return HFPolicy(tiny_model_dir)


@pytest.fixture
def gateway(policy):
    from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway
    from agentgym.integrations.gateway.recorder import Recorder

    recorder = Recorder(policy, model_names=("tiny",), context_len=512, default_max_tokens=16)
    with RunningGateway(recorder, GatewayConfig(port=0)) as running:
        yield running


@pytest.fixture
def gateway_training():
    """start(cfg, ready_timeout, **kwargs): `train_through_gateway(cfg, GatewayConfig(port=0), **kwargs)` in a
    thread, returned once the gateway serves: (the thread, its URL, the dict its summary lands in, the
    exceptions it raised). The caller joins the thread and checks `failed` is empty."""
    import threading

    from agentgym.integrations.gateway.app import GatewayConfig
    from agentgym.integrations.gateway.training import train_through_gateway

    def start(cfg, ready_timeout: float = 120, **kwargs):
        ready, urls, result, failed = threading.Event(), [], {}, []

        def trainer() -> None:
            try:
                result.update(train_through_gateway(cfg, GatewayConfig(port=0),
                                                    on_ready=lambda url: (urls.append(url), ready.set()), **kwargs))
            except BaseException as exc:  # noqa: BLE001  reported to the test
                failed.append(exc)
                ready.set()

        thread = threading.Thread(target=trainer)
        thread.start()
        assert ready.wait(ready_timeout) and not failed, failed
        return thread, urls[0], result, failed

    return start
