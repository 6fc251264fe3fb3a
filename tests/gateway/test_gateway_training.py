"""Training mode: the user's program plays episodes through the gateway and reports their rewards;
the trainer's own run_iteration updates the policy on them between batches."""

from __future__ import annotations

import json

import httpx
import pytest
import torch

openai = pytest.importorskip("openai")

from agentgym.integrations.gateway.app import GatewayConfig  # noqa: E402
from agentgym.integrations.gateway.training import train_through_gateway  # noqa: E402
from agentgym.trainers.config import load_config  # noqa: E402


def program(url: str, episodes: int, group_size: int = 2) -> None:
    """A user's agent program: one question per episode, reward 1 for the first episode of a group."""
    for g in range(episodes // group_size):
        for k in range(group_size):
            ep = httpx.post(url + "/episodes", json={"group": f"task-{g}"}).json()
            client = openai.OpenAI(base_url=ep["base_url"], api_key="unused", max_retries=0, timeout=120)
            client.chat.completions.create(model="agentgym", messages=[{"role": "user", "content": "look"}])
            httpx.post(url + f"/episodes/{ep['id']}/reward", json={"reward": float(k == 0)}, timeout=120)


@pytest.mark.parametrize("serve_during_update", [False, True])
def test_training_through_the_gateway_updates_the_policy(tiny_model_dir, tmp_path, serve_during_update,
                                                         gateway_training):
    cfg = load_config("household-tiny", [f"policy.model={tiny_model_dir}", "tiny.build=false", "sft.enabled=false",
                                          "iterations=2", f"run_dir={tmp_path / 'run'}", "torch_threads=1",
                                          "estimator.name=grpo", "rollout.max_new_tokens=4", "ppo.lr=0.01",
                                          "eval.num_tasks=2", "eval.episodes_per_task=1"])
    trainer, url, result, failed = gateway_training(cfg, episodes_per_iter=4, serve_during_update=serve_during_update,
                                                    log=lambda line: None)
    program(url, episodes=8)
    trainer.join(300)
    assert not trainer.is_alive() and not failed and result["gateway"]["episodes_closed"] == 8
    from transformers import AutoModelForCausalLM

    start = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "final_model").state_dict()
    assert any(not torch.equal(start[k], final[k]) for k in start)  # the reported rewards moved the weights
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    iterations = [json.loads(line) for line in lines if "gateway/episodes_closed" in line]
    assert len(iterations) == 2 and iterations[-1]["async/staleness_max"] in (0, 1)
    assert iterations[-1]["gateway/episodes_closed"] == 8


def test_training_through_the_gateway_never_replaces_an_earlier_run(tmp_path):
    """Issue 53: `agentgym gateway --train household-tiny` writes to runs/household-tiny, where the
    main job's run may be; it is refused in one line before anything is built or served."""
    from agentgym.errors import ConfigError

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: household-tiny\n")
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    cfg = load_config("household-tiny", [f"run_dir={run}", "torch_threads=auto", "iterations=1"])
    with pytest.raises(ConfigError, match="holds an earlier run .*run_dir=DIR"):
        train_through_gateway(cfg, GatewayConfig(port=0), episodes_per_iter=2, log=lambda line: None)
    assert (run / "metrics.jsonl").read_text() == '{"step": 0}\n' and not (run / "tiny_model").exists()
