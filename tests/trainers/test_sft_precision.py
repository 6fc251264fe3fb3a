"""SFT in bf16 learns as SFT in fp32 does: a fresh autocast context per step. One context around the
whole loop keeps autocast's bf16 copy of each trained weight from the first step, so the model
would compute with its initial weights throughout (LoRA: B = 0) and the loss would not move."""

from __future__ import annotations

import pytest
import torch

from agentgym.trainers.precision import cpu_has_bf16
from agentgym.trainers.samples import Sample
from agentgym.trainers.sft import train_sft


def _samples() -> list[Sample]:
    ids = [[5, 9, 17, 33, 41, 2], [5, 9, 18, 34, 42, 2], [7, 9, 17, 35, 43, 2]]
    mask = [[0, 0, 0, 1, 1, 1]] * 3
    return [Sample(input_ids=i, loss_mask=m, old_logprobs=[0.0] * 6, advantages=[float(x) for x in m])
            for i, m in zip(ids, mask)]


@pytest.mark.skipif(not cpu_has_bf16(), reason="needs a CPU with native bf16 matrix multiplies")
def test_sft_under_bf16_learns_as_in_fp32(tiny_policy_factory):
    finals = {}
    for dtype in ("fp32", "bf16"):
        torch.manual_seed(0)
        policy = tiny_policy_factory(lora={})
        stats = train_sft(policy, _samples(), epochs=15, lr=3e-3, batch_size=1, matmul_dtype=dtype)
        # a random 2-layer base with LoRA alone learns slowly: 6.04 -> 4.69 in these 45 steps
        assert stats["final_loss"] < 0.85 * stats["first_loss"], (dtype, stats["first_loss"], stats["final_loss"])
        finals[dtype] = stats["final_loss"]
    assert abs(finals["bf16"] - finals["fp32"]) < 0.05
    # the failure this guards against: the same loop inside one autocast context barely moves
    torch.manual_seed(0)
    policy = tiny_policy_factory(lora={})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        stuck = train_sft(policy, _samples(), epochs=15, lr=3e-3, batch_size=1)
    assert abs(stuck["final_loss"] - stuck["first_loss"]) < 0.01 * stuck["first_loss"]


def test_run_sft_multiplies_in_sft_matmul_dtype_and_names_that_setting(tiny_policy_factory, monkeypatch):
    from agentgym.trainers import sft
    from agentgym.trainers.config import load_config

    seen = []

    def recording_train_sft(policy, samples, *args, matmul_dtype="fp32", dtype_setting="ppo.matmul_dtype", **kwargs):
        seen.append((matmul_dtype, dtype_setting))
        return {"final_loss": 0.0, "steps": 0}

    monkeypatch.setattr(sft, "train_sft", recording_train_sft)
    for dtype in ("bf16", "fp32"):
        cfg = load_config("household-tiny", [f"sft.matmul_dtype={dtype}", "sft.num_tasks=2"])
        sft.run_sft(tiny_policy_factory(), cfg.sft, cfg.env, seed=0, session=None)
    assert seen == [("bf16", "sft.matmul_dtype"), ("fp32", "sft.matmul_dtype")]
