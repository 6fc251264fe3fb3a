"""Ways of doing less work in a real model's update, each on/off on the same samples in one process
(benchmarks/speed/real_model_speed.py --ways). CPU seconds (this process), 1 torch thread.

    update variants   ppo_update (SGD at lr 0: the gradient is kept, nothing moves) on the same
                      minibatch: the LM head and log-softmax at every position vs at the loss
                      positions alone; the shared-prefix pass off/on; bf16 autocast off/on. Per
                      variant: CPU s, the gradient's relative distance to the plain path's, the
                      first minibatch's largest ratio and approx KL to the rollout's logprobs.
    admissible step   the trie mask + log-softmax + sampling of one decode step on the 49k
                      vocabulary, beside the model's forward of the same step
    bf16 base         LoRA's frozen base stored in bf16 (HFPolicy.keep_base_in_bf16, what
                      ppo.matmul_dtype=bf16 does with LoRA) on a copy of the policy, against the fp32
                      policy: the update on the same minibatch, and the rollout (prefill + decode of
                      the same prompts, same seed, alternating, best of `rounds`) with the first
                      ratio of what each rollout sampled as the update recomputes it
"""

from __future__ import annotations

import contextlib
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


def bf16_base_copy(policy):
    """A copy of the LoRA `policy` whose frozen base is stored in bf16 (the rollout runs in bf16)."""
    import copy

    from agentgym.policies.hf import HFPolicy

    fast = HFPolicy.from_loaded(copy.deepcopy(policy.model), policy.tokenizer, policy.max_prompt_tokens)
    fast.keep_base_in_bf16()
    return fast


def first_ratio(policy, prompts, completions, matmul_dtype: str) -> float:
    """The largest |ratio - 1| over the sampled tokens when the update (`matmul_dtype`) recomputes
    their logprobs: what the first minibatch's ratio would be."""
    from agentgym.trainers.ppo import token_logprobs
    from agentgym.trainers.precision import update_autocast

    worst = 0.0
    for prompt, c in zip(prompts, completions):
        ids = torch.tensor([list(prompt) + c.response_ids])
        where = torch.zeros(1, ids.shape[1] - 1, dtype=torch.bool)
        where[0, len(prompt) - 1:] = True
        with torch.no_grad(), update_autocast(matmul_dtype, policy.device):
            logp, _ = token_logprobs(policy.model, ids, torch.ones_like(ids), positions=where)
        new = logp[0, len(prompt) - 1:]
        worst = max(worst, float((new - torch.tensor(c.response_logprobs)).exp().sub(1).abs().max()))
    return worst


def bf16_base(policy, samples, prompts, rounds: int = 3, max_new_tokens: int = 16) -> dict:
    from agentgym.policies.base import SamplingParams

    fast = bf16_base_copy(policy)
    out: dict = {"update": {}, "rollout": {}}
    reference = None
    for name, p, dtype in (("fp32 base, bf16 autocast", policy, "bf16"), ("bf16 base", fast, "bf16")):
        stats, grad, cpu = _update(p, samples, share_prefixes=True, matmul_dtype=dtype)
        reference = grad if reference is None else reference
        out["update"][name] = {"cpu_s": cpu, "grad_rel_error_vs_fp32_base": float((grad - reference).norm() / reference.norm()),
                               "ratio_max_first_minibatch": stats["ratio_max_first_minibatch"]}
        print(f"  update, {name}: {cpu:.1f} CPU s", flush=True)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
    cpu = {"fp32": [], "bf16": []}
    completions = {}
    for _ in range(rounds):
        for name, p in (("fp32", policy), ("bf16", fast)):
            start = time.process_time()
            completions[name] = p.generate_ids(prompts, sampling)
            cpu[name].append(time.process_time() - start)
    tokens = {name: sum(len(c.response_ids) for c in cs) for name, cs in completions.items()}
    out["rollout"] = {
        "prompts": len(prompts), "prompt_tokens": sum(len(p) for p in prompts), "sampled_tokens": tokens,
        "cpu_s_best": {k: min(v) for k, v in cpu.items()}, "cpu_s_all": cpu,
        # the old bf16 setting: an fp32 rollout whose tokens the bf16 update recomputes
        "first_ratio_dev_fp32_rollout_bf16_update": first_ratio(policy, prompts, completions["fp32"], "bf16"),
        "first_ratio_dev_fp32_rollout_fp32_update": first_ratio(policy, prompts, completions["fp32"], "fp32"),
        "first_ratio_dev_bf16_rollout_bf16_update": first_ratio(fast, prompts, completions["bf16"], "bf16"),
    }
    r = out["rollout"]
    print(f"  rollout of {len(prompts)} prompts: fp32 {r['cpu_s_best']['fp32']:.2f} CPU s, bf16 base "
          f"{r['cpu_s_best']['bf16']:.2f} CPU s (best of {rounds}); first ratio |r-1| max: fp32 rollout + bf16 update "
          f"{r['first_ratio_dev_fp32_rollout_bf16_update']:.4f}, bf16 rollout + bf16 update "
          f"{r['first_ratio_dev_bf16_rollout_bf16_update']:.4f}, fp32 + fp32 {r['first_ratio_dev_fp32_rollout_fp32_update']:.5f}",
          flush=True)
    return out


def measure_ways(policy, samples, decode_rows: int, max_samples: int = 12, prompts=None,
                 only_bf16_base: bool = False) -> dict:
    chosen = sorted((s for s in samples if sum(s.loss_mask)), key=lambda s: s.input_ids)[:max_samples]
    chosen = with_advantages(chosen)
    print(f"ways: {len(chosen)} samples, {sum(len(s) for s in chosen)} tokens", flush=True)
    out = {"samples": len(chosen), "tokens": sum(len(s) for s in chosen)}
    if not only_bf16_base:
        out.update(update=update_variants(policy, chosen), admissible_step=admissible_step(policy, decode_rows))
    if prompts and getattr(policy, "is_lora", False) and policy.matmul_context is contextlib.nullcontext:
        out["bf16_base"] = bf16_base(policy, chosen, prompts[::max(1, len(prompts) // decode_rows)][:decode_rows])
    return out
