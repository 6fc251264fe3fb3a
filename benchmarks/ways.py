"""Ways of doing less work in a real model's update, each on/off on the same samples in one process
(benchmarks/real_model_speed.py --ways). CPU seconds (this process), 1 torch thread.

    update variants   ppo_update (SGD at lr 0: the gradient is kept, nothing moves) on the same
                      minibatch: the LM head and log-softmax at every position vs at the loss
                      positions alone; the shared-prefix pass off/on; bf16 autocast off/on. Per
                      variant: CPU s, the gradient's relative distance to the plain path's, the
                      first minibatch's largest ratio and approx KL to the rollout's logprobs.
    admissible step   the trie mask + log-softmax + sampling of one decode step on the 49k
                      vocabulary, beside the model's forward of the same step
"""

from __future__ import annotations

import time

import numpy as np
import torch


def _update(policy, samples, **ppo) -> tuple[dict, torch.Tensor, float]:
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    params = policy.trainable_parameters()
    pc = PPOConfig(**{"epochs": 1, "minibatch_size": len(samples), "micro_batch_size": 16,
                      "micro_batch_tokens": 1024, **ppo})
    optimizer = torch.optim.SGD(params, lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    start = time.process_time()
    stats = learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(0), 0)
    cpu = time.process_time() - start
    grad = torch.cat([p.grad.flatten().clone() for p in params if p.grad is not None])
    for p in params:
        p.grad = None
    return stats, grad, cpu


def _full_head(real):
    """token_logprobs with the LM head and log-softmax at every position (positions dropped)."""

    def token_logprobs(model, input_ids, attention_mask, want_hidden=False, want_entropy=False, positions=None,
                       allowed=None):
        return real(model, input_ids, attention_mask, want_hidden, want_entropy, None, allowed)

    return token_logprobs


def update_variants(policy, samples) -> dict:
    from agentgym.trainers import learner

    variants = [
        ("plain: LM head everywhere, no prefix sharing, fp32", {"share_prefixes": False}, True),
        ("LM head at loss positions", {"share_prefixes": False}, False),
        ("+ shared prefixes", {"share_prefixes": True}, False),
        ("+ bf16 autocast", {"share_prefixes": True, "matmul_dtype": "bf16"}, False),
    ]
    real = learner.token_logprobs
    out, reference = {}, None
    for name, ppo, full_head in variants:
        learner.token_logprobs = _full_head(real) if full_head else real
        try:
            stats, grad, cpu = _update(policy, samples, **ppo)
        finally:
            learner.token_logprobs = real
        if reference is None:
            reference = grad
        out[name] = {"cpu_s": cpu, "grad_rel_error_vs_plain": float((grad - reference).norm() / reference.norm()),
                     "ratio_max_first_minibatch": stats["ratio_max_first_minibatch"],
                     "approx_kl": stats["approx_kl"], "shared_prefix_token_ratio": stats.get("shared_prefix_token_ratio")}
        print(f"  {name}: {cpu:.1f} CPU s, grad error {out[name]['grad_rel_error_vs_plain']:.2e}, "
              f"first ratio max {stats['ratio_max_first_minibatch']:.4f}", flush=True)
    return out


def admissible_step(policy, rows: int, allowed_per_row: int = 12, steps: int = 20) -> dict:
    """CPU ms of one admissible-only decoding step's vocabulary work (trie mask, log-softmax, draw)
    beside a free step's (log-softmax, draw), on [rows, vocab] logits."""
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import _within

    vocab = policy.model.get_output_embeddings().out_features
    logits = torch.randn(rows, vocab)
    rng = np.random.default_rng(0)
    nodes = [{int(t): {} for t in rng.integers(0, vocab, allowed_per_row)} for _ in range(rows)]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=1)
    out = {}
    for name, tries in (("free", None), ("admissible_only", nodes)):
        start = time.process_time()
        for _ in range(steps):
            x = _within(logits, tries) if tries else logits
            token = policy._pick(x, sampling)
            torch.log_softmax(x, dim=-1).gather(-1, token[:, None])
        out[name + "_ms_per_step"] = (time.process_time() - start) / steps * 1e3
    out["rows"] = rows
    return out


def with_advantages(samples, seed: int = 0) -> list:
    """The samples with a nonzero advantage each (N(0, 1) per sample, on its loss tokens): a batch
    whose episodes all failed has all-zero advantages and a zero gradient, which compares nothing.
    The cost of the update does not depend on the values."""
    import dataclasses

    rng = np.random.default_rng(seed)
    out = []
    for s in samples:
        a = float(rng.normal())
        out.append(dataclasses.replace(s, advantages=[a if m else 0.0 for m in s.loss_mask]))
    return out


def measure_ways(policy, samples, decode_rows: int, max_samples: int = 12) -> dict:
    chosen = sorted((s for s in samples if sum(s.loss_mask)), key=lambda s: s.input_ids)[:max_samples]
    chosen = with_advantages(chosen)
    print(f"ways: {len(chosen)} samples, {sum(len(s) for s in chosen)} tokens", flush=True)
    return {"samples": len(chosen), "tokens": sum(len(s) for s in chosen),
            "update": update_variants(policy, chosen), "admissible_step": admissible_step(policy, decode_rows)}
