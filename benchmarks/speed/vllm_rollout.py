"""vLLM rollout engine figures: logprob agreement with transformers, rollout throughput of HF
generate vs vLLM on the same model and batch, weight-sync time per update.

    python benchmarks/speed/vllm_rollout.py --quick                  # tiny model, CPU, a minute or two
    python benchmarks/speed/vllm_rollout.py                          # bigger tiny model and batch
    python benchmarks/speed/vllm_rollout.py --device cuda --model Qwen/Qwen2.5-1.5B-Instruct   # a GPU box
    python benchmarks/speed/vllm_rollout.py --ray                    # the same, on Ray policy replicas

Throughput is response tokens per second of `policy.generate` on one batch of chat prompts
(sampling at temperature 1, no early stop difference: both stop at eos or max_new_tokens and
only the tokens actually generated are counted), after one warm-up call. The ratio is
vLLM / HF measured in the same run. Weight sync: full `sync_weights` of all parameters (and a
LoRA adapter sync) timed over several updates.

--ray measures the same on one Ray policy replica (`policy.engine=ray`, 1 CPU) hosting an
HFPolicy, then a vLLM engine (`ray.policy_engine=hf|vllm`): tokens/s of the trainer's
`generate` (the prompts and completions cross the actor boundary) and the seconds of a weight
sync through Ray's object store after each update, full weights and LoRA.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

CORPUS = [
    "go to the kitchen and take the apple", "open the fridge", "<action>look</action>", "take key",
    "You see a table, a chair and a lamp.", "go right", "go left", "You are in room 2.", "put the mug on the desk",
] * 20


def _prompts(n: int) -> list[list[dict]]:
    rooms = ["kitchen", "hall", "garden", "office", "cellar", "attic", "bathroom", "porch"]
    return [[{"role": "system", "content": "Act. Reply with <action>...</action>."},
             {"role": "user", "content": f"You are in the {rooms[i % len(rooms)]}. You see a table, a chair "
                                         f"and a lamp. Take the key in room {i % 5}."}] for i in range(n)]


def _timed_generate(policy, prompts, sampling, repeats: int):
    policy.generate(prompts[:2], sampling)  # warm-up (first-call allocations, lazy init)
    tokens, seconds = 0, 0.0
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = policy.generate(prompts, sampling)
        seconds += time.perf_counter() - t0
        tokens += sum(len(c.response_ids) for c in out)
    return tokens / seconds, out


def _logprob_agreement(hf_model, completions, device) -> float:
    import torch

    worst = 0.0
    for c in completions:
        ids = torch.tensor([c.prompt_ids + c.response_ids], device=device)
        with torch.no_grad():
            logp = torch.log_softmax(hf_model(ids).logits[0].float(), -1)
        start = len(c.prompt_ids) - 1
        for j, (tok, lp) in enumerate(zip(c.response_ids, c.response_logprobs)):
            worst = max(worst, abs(float(logp[start + j, tok]) - lp))
    return worst


def _perturb(model, scale: float, only: str = "") -> None:
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if only in name:
                p.add_(scale * torch.randn_like(p))


def ray_replicas(model: str, dtype: str, prompts, sampling, repeats: int, syncs: int) -> None:
    import ray

    from agentgym.executors_ray import RayConfig
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.ray_policy import RayRolloutPolicy

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"model: {model} ({dtype}); batch {len(prompts)} x {sampling.max_new_tokens} new tokens, {repeats} timed "
          f"calls; one replica of 1 CPU")
    engine_args = {"max_model_len": 1024, "kv_cache_gib": 0.5}
    rates = {}
    for engine in ("hf", "vllm"):
        for lora in (None, {"r": 16}):
            trainer = HFPolicy(model, dtype=dtype, lora=lora)
            rc = RayConfig(policy_replicas=1, policy_num_cpus=1, policy_engine=engine)
            t0 = time.perf_counter()
            remote = RayRolloutPolicy(trainer, model, rc, lora=lora, vllm_kwargs=engine_args)
            startup = time.perf_counter() - t0
            times = []
            for _ in range(syncs):  # each update moves the weights; the next generate syncs them
                _perturb(trainer.model, 1e-2 if lora else 1e-3, only="lora_B" if lora else "")
                times.append(remote.sync())
            worst = _logprob_agreement(trainer.model, remote.generate(prompts[:4], sampling), trainer.device)
            what = "LoRA r=16 adapter" if lora else "full weights"
            if lora is None:
                rates[engine], _ = _timed_generate(remote, prompts, sampling, repeats)
                print(f"ray replica {engine}: {rates[engine]:,.0f} tok/s (actor start-up {startup:.1f}s, not counted)")
            print(f"ray replica {engine}, {what} sync: {statistics.median(times) * 1e3:.1f} ms per update (median of "
                  f"{syncs}); trainer logprobs after sync: max |diff| = {worst:.2e}")
            remote.close()
    print(f"ray replica throughput ratio vLLM/HF = {rates['vllm'] / rates['hf']:.2f}x")
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny model, small batch (CPU CI)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default=None, help="HF folder or cached hub id (default: build a tiny model)")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--syncs", type=int, default=None, help="weight-sync updates to time")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU (1: shared 2-core box)")
    parser.add_argument("--ray", action="store_true", help="HF vs vLLM policy replicas as Ray actors (CPU)")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    batch = args.batch or (8 if args.quick else (64 if cuda else 16))
    max_new = args.max_new_tokens or (16 if args.quick else (128 if cuda else 32))
    repeats = args.repeats or (2 if args.quick else 3)
    syncs = args.syncs or (3 if args.quick else 5)

    import torch

    if not cuda:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.vllm_engine import VLLMPolicy

    tmp = tempfile.TemporaryDirectory(prefix="agentgym_vllm_bench_")
    model = args.model
    if model is None:
        from agentgym.policies.tiny import build_tiny_model

        size = dict(hidden=64, layers=2, heads=2) if args.quick else dict(hidden=256, layers=4, heads=4)
        model = str(build_tiny_model(Path(tmp.name) / "model", texts=CORPUS, vocab_size=500, seed=0, **size))
    dtype = "bf16" if cuda else "fp32"
    prompts = _prompts(batch)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=max_new, seed=0)

    if args.ray:
        ray_replicas(model, dtype, prompts, sampling, repeats, syncs)
        tmp.cleanup()
        return
    hf = HFPolicy(model, device=args.device, dtype=dtype)
    n_params = sum(p.numel() for p in hf.model.parameters())
    print(f"model: {model} ({n_params / 1e6:.2f}M params, {dtype}, {args.device}); batch {batch} x "
          f"{max_new} new tokens, {repeats} timed calls")
    hf_tps, _ = _timed_generate(hf, prompts, sampling, repeats)

    t0 = time.perf_counter()
    engine = VLLMPolicy(model, dtype=dtype, max_model_len=1024 if not cuda else 4096, seed=0)
    startup = time.perf_counter() - t0
    vllm_tps, completions = _timed_generate(engine, prompts, sampling, repeats)

    worst = _logprob_agreement(hf.model, completions, hf.device)
    n_tokens = sum(len(c.response_ids) for c in completions)
    print(f"logprob agreement, vLLM vs transformers (same sampled tokens, {n_tokens}"
          f" tokens): max |diff| = {worst:.2e}  (target <= 1e-3 in fp32)")
    print(f"rollout throughput: HF generate {hf_tps:,.0f} tok/s, vLLM {vllm_tps:,.0f} tok/s, "
          f"ratio vLLM/HF = {vllm_tps / hf_tps:.2f}x  (vLLM engine start-up {startup:.1f}s, not counted)")

    # Weight sync: each update perturbs the trainer's weights a little, then pushes them.
    times = []
    with torch.no_grad():
        for k in range(syncs):
            for p in hf.model.parameters():
                p.add_(1e-3 * torch.randn_like(p))
            times.append(engine.sync_weights(hf.model.named_parameters()))
    after = engine.generate(prompts[:4], sampling)
    worst_after = _logprob_agreement(hf.model, after, hf.device)
    size_mb = sum(p.numel() * p.element_size() for p in hf.model.parameters()) / 2**20
    print(f"full weight sync ({size_mb:.1f} MB): {statistics.median(times) * 1e3:.1f} ms per update (median of "
          f"{syncs}); logprobs after sync still agree: max |diff| = {worst_after:.2e}")
    engine.close()

    lora_engine = VLLMPolicy(model, dtype=dtype, max_model_len=1024 if not cuda else 4096, seed=0,
                             enable_lora=True, max_lora_rank=16)
    lora_policy = HFPolicy(model, device=args.device, dtype=dtype, lora={"r": 16})
    lora_times = []
    for k in range(syncs):
        with torch.no_grad():
            for name, p in lora_policy.model.named_parameters():
                if "lora_B" in name:
                    p.add_(1e-2 * torch.randn_like(p))
        lora_times.append(lora_engine.sync_from(lora_policy))
    out = lora_engine.generate(prompts[:4], sampling)
    worst_lora = _logprob_agreement(lora_policy.model, out, lora_policy.device)
    print(f"LoRA adapter sync (r=16, save + load as a new LoRARequest): {statistics.median(lora_times) * 1e3:.1f} ms "
          f"per update (median of {syncs}); logprobs agree: max |diff| = {worst_lora:.2e}")
    lora_engine.close()
    tmp.cleanup()


if __name__ == "__main__":  # vLLM may spawn processes: nothing runs at import
    main()
