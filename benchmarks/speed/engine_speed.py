"""Decode and prefill speed of `policy.engine=pool` against its floor, beside the eager HF path.

In one process (1 torch thread on a CPU):

1. **Decode** at each of `--rows` (16, 64, 256): rows continuing `--groups` distinct prompts of
   `--context` tokens (a group's rows share their prompt, prefilled once, and sample apart at
   temperature 1), `--steps` tokens each, no end of reply. Reported: ms per step, tokens/s, and the
   step's floor:
   - CPU: the step's FLOPs (the body's linears and the LM head for every row, attention over each
     row's context) at the matrix-multiply rate this CPU reaches on the model's own shapes at that
     many rows (benchmarks/speed/real_model_speed.py's method: best of ten CPU-timed rounds);
   - CUDA: the bytes a step must read (the weights once, each row's keys and values) at the copy
     bandwidth measured on the card.
   The eager HF path (`policy.engine=hf`) is timed the same way at `--eager-rows`.
2. **Prefill** of `--prefill-rows` distinct prompts of `--context` tokens: tokens/s against the
   FLOPs at the 1,024-row matrix rate (CPU) or the card's bf16 rate (CUDA).
3. `--iteration`: one household-smol iteration (or `--iterations N`) with `policy.engine=pool`, timed
   by phase against its floor with benchmarks/speed/real_model_speed.py's clock and floor (the preset's own
   setting; `--set` adds overrides, e.g. ppo.matmul_dtype=bf16 policy.lora.top_layers=6).

Writes docs/engine_speed.json (`--out`), under the key `cpu` or `gpu` by device.

Usage: OMP_NUM_THREADS=1 python benchmarks/speed/engine_speed.py [--model smollm2-135m-instruct] [--rows 16 64 256]
           [--iteration --set ppo.matmul_dtype=bf16 policy.lora.top_layers=6]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.speed.real_model_speed import linear_shapes, matmul_rate, model_sizes  # noqa: E402  (the same floor's method)


# model shapes measured with random weights (decode speed does not depend on the values): a config's fields
SHAPES = {"qwen2.5-1.5b": dict(model_type="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                               num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768,
                               vocab_size=151936, tie_word_embeddings=True, rope_theta=1000000.0)}


def shape_folder(shape: str, tokenizer_from: str, out: Path) -> str:
    """An HF folder of `shape` with random weights and the tokenizer of `tokenizer_from` (its ids are
    within the shape's vocabulary)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from agentgym.policies.model_files import resolve_model

    fields = dict(SHAPES[shape])
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(resolve_model(tokenizer_from)).save_pretrained(out)
    return str(out)


def load_policy(model: str, device: str, dtype: str, lora: bool):
    from agentgym.policies.hf import HFPolicy

    policy = HFPolicy(model, device=device, dtype=dtype if dtype != "bf16-base" else None,
                      lora={"r": 16} if lora or dtype == "bf16-base" else None)
    if dtype == "bf16-base":
        policy.keep_base_in_bf16()
    return policy


def pooled_copy(policy):
    """The same model and weights, generating on the pool engine (its own caches and generator)."""
    pooled = copy.copy(policy)
    pooled._prefixes, pooled._generator = {}, torch.Generator(device=policy.device).manual_seed(0)
    pooled.use_pool_engine(log=lambda line: print(line, flush=True))
    return pooled


def prompts_for(policy, count: int, context: int, seed: int) -> list[list[int]]:
    """`count` prompts of `context` ids drawn from the vocabulary's ordinary tokens."""
    generator = torch.Generator().manual_seed(seed)
    low = 1000 if len(policy.tokenizer) > 4000 else 10
    return torch.randint(low, len(policy.tokenizer) - 1, (count, context), generator=generator).tolist()


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


# --- the floors ------------------------------------------------------------------------------------

def cpu_step_floor(sizes: dict, shapes, rows: int, context: float, dtype: torch.dtype) -> dict:
    """Seconds of one decode step of `rows` rows at `context` keys each, at this CPU's matmul rate for
    `rows` rows (the LM head at the body's dtype unless the head is fp32: bf16-base)."""
    body, head = shapes
    body_rate = matmul_rate(rows, body, dtype) * 1e9
    head_dtype = torch.float32 if dtype == torch.bfloat16 and sizes.get("head_fp32") else dtype
    head_rate = matmul_rate(rows, [head], head_dtype) * 1e9
    attn = 4 * sizes["layers"] * sizes["attn_width"] * rows * context
    body_flops = 2 * sizes["body_linear_params"] * rows + attn
    head_flops = 2 * sizes["head_params"] * rows
    return {"floor_s": body_flops / body_rate + head_flops / head_rate, "body_gflops_rate": body_rate / 1e9,
            "head_gflops_rate": head_rate / 1e9}


def gpu_bandwidth(device) -> float:
    """Bytes/s of a 1 GiB device-to-device copy (read + write), the best of five."""
    x = torch.empty(2**28, dtype=torch.float32, device=device)
    y = torch.empty_like(x)
    best = 0.0
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        end.record()
        torch.cuda.synchronize()
        best = max(best, 2 * x.numel() * 4 / (start.elapsed_time(end) / 1e3))
    return best


def gpu_step_floor(policy, sizes: dict, rows: int, context: float, bandwidth: float) -> dict:
    weights = sum(p.numel() * p.element_size() for p in policy.model.parameters())
    config = policy.model.config
    kv_heads = getattr(config, "num_key_value_heads", config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    element = policy.pool_engine.pool.keys.element_size() if policy.pool_engine.pool.keys is not None else 2
    kv = 2 * sizes["layers"] * kv_heads * head_dim * element * rows * context
    return {"floor_s": (weights + kv) / bandwidth, "bytes": weights + kv, "bandwidth_gb_s": bandwidth / 1e9}


# --- measurements ------------------------------------------------------------------------------------

def time_decode(policy, rows: int, groups: int, context: int, steps: int, seed: int) -> dict:
    """Decode `steps` tokens on `rows` rows (groups sharing a prompt); seconds of the decode steps alone."""
    from agentgym.policies.base import SamplingParams

    prompts = prompts_for(policy, groups, context, seed)
    prompts = [prompts[r % groups] for r in range(rows)]
    eos, policy.eos_ids = policy.eos_ids, set()  # no reply ends: every row decodes every step
    sampling = SamplingParams(temperature=1.0, max_new_tokens=steps + 1, seed=seed)
    try:
        if policy.pool_engine is not None:
            stats = policy.pool_engine.stats
            before = (stats.decode_s, stats.decode_cpu_s, stats.decode_steps)
            policy.generate_ids(prompts, sampling)
            sync(policy.device)
            wall, cpu, count = (stats.decode_s - before[0], stats.decode_cpu_s - before[1],
                                stats.decode_steps - before[2])
        else:
            wall, cpu, count = eager_decode_seconds(policy, prompts, sampling)
    finally:
        policy.eos_ids = eos
    return {"rows": rows, "steps": count, "ms_per_step_wall": 1e3 * wall / count, "ms_per_step_cpu": 1e3 * cpu / count,
            "tokens_per_s_wall": rows * count / wall, "tokens_per_s_cpu": rows * count / cpu,
            "mean_context": context + (count + 1) / 2}


def eager_decode_seconds(policy, prompts, sampling) -> tuple[float, float, int]:
    """The eager path's decode: the whole call less its prefill forward (its sampling and bookkeeping
    between steps count as decode)."""
    spent = {"wall": 0.0, "cpu": 0.0, "steps": 0}
    starts = []

    def pre(module, args, kwargs):
        starts.append((time.perf_counter(), time.process_time()))

    def post(module, args, kwargs, output):
        start = starts.pop()
        if kwargs["input_ids"].shape[1] > 1:
            spent["wall"] += time.perf_counter() - start[0]
            spent["cpu"] += time.process_time() - start[1]
        else:
            spent["steps"] += 1

    hooks = [policy.model.register_forward_pre_hook(pre, with_kwargs=True),
             policy.model.register_forward_hook(post, with_kwargs=True)]
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        policy.generate_ids(prompts, sampling, batch_size=len(prompts))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        for hook in hooks:
            hook.remove()
    return wall - spent["wall"], cpu - spent["cpu"], spent["steps"]


def time_prefill(policy, rows: int, context: int, seed: int) -> dict:
    from agentgym.policies.base import SamplingParams

    prompts = prompts_for(policy, rows, context, seed + 1)
    stats = policy.pool_engine.stats
    before = (stats.prefill_s, stats.prefill_cpu_s, stats.prefill_tokens)
    policy.generate_ids(prompts, SamplingParams(temperature=1.0, max_new_tokens=1, seed=seed))
    sync(policy.device)
    wall, cpu, tokens = (stats.prefill_s - before[0], stats.prefill_cpu_s - before[1],
                         stats.prefill_tokens - before[2])
    return {"rows": rows, "context": context, "tokens": tokens, "tokens_per_s_wall": tokens / wall,
            "tokens_per_s_cpu": tokens / cpu, "wall_s": wall, "cpu_s": cpu}


def prefill_floor(sizes: dict, shapes, tokens: int, context: int, rows: int, dtype: torch.dtype) -> float:
    body, _ = shapes
    rate = matmul_rate(1024, body, dtype) * 1e9
    attn = 4 * sizes["layers"] * sizes["attn_width"] * rows * context * (context + 1) / 2
    return (2 * sizes["body_linear_params"] * tokens + attn) / rate


# --- two design choices, each on/off (--ab) ---------------------------------------------------------------

def best_ms(fn, rounds: int = 5, reps: int = 10) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - start) / reps)
    return 1e3 * best


def sampling_ab(vocab: int = 49152) -> dict:
    """The step's draw at temperature 1: torch.multinomial (one exponential draw per id, HFPolicy's) against
    the pool engine's inverse CDF (one uniform per row), CPU ms, best of five."""
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.pool_engine import pick_tokens

    generator = torch.Generator().manual_seed(0)
    out = {}
    for rows in (16, 64):
        logits = torch.randn(rows, vocab, generator=generator) * 3
        multinomial = best_ms(lambda: torch.multinomial(torch.softmax(logits, -1), 1, generator=generator))
        inverse = best_ms(lambda: pick_tokens(logits, SamplingParams(temperature=1.0), generator))
        out[str(rows)] = {"multinomial_ms": multinomial, "inverse_cdf_ms": inverse}
    return out


def compile_ab(rows: int = 16, keys: int = 256) -> dict:
    """One SmolLM2-shaped decoder layer's decode step (fused q/k/v and gate/up, RMSNorm, RoPE, attention
    over `keys` positions as two matmuls, SwiGLU) eager against torch.compile (inductor, static shapes),
    CPU ms, best of five; its four matmuls alone for scale; the compile's seconds and graph count."""
    import torch.nn.functional as F
    from torch._dynamo.utils import counters

    hidden, heads, kv_heads, dim, inter = 576, 9, 3, 64, 1536
    g = torch.Generator().manual_seed(0)
    w = [torch.rand(hidden, generator=g), torch.rand(hidden, generator=g),
         torch.randn(heads * dim + 2 * kv_heads * dim, hidden, generator=g) * 0.02,
         torch.randn(hidden, heads * dim, generator=g) * 0.02, torch.randn(2 * inter, hidden, generator=g) * 0.02,
         torch.randn(hidden, inter, generator=g) * 0.02]
    cache = [torch.randn(rows, kv_heads, keys, dim, generator=g) for _ in range(2)]

    def norm(x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))

    def rotate(x):
        return torch.cat((-x[..., dim // 2:], x[..., :dim // 2]), -1)

    def layer(h, cos, sin, k_cache, v_cache, position, visible, n1, n2, qkv, o, gate_up, down):
        q, k, v = F.linear(norm(h, n1), qkv).split((heads * dim, kv_heads * dim, kv_heads * dim), -1)
        q, k = q.view(rows, heads, dim), k.view(rows, kv_heads, dim)
        q, k = q * cos[:, None] + rotate(q) * sin[:, None], k * cos[:, None] + rotate(k) * sin[:, None]
        index = torch.arange(rows)
        k_cache[index, :, position] = k
        v_cache[index, :, position] = v.view(rows, kv_heads, dim)
        scores = torch.matmul(q.reshape(rows, kv_heads, heads // kv_heads, dim), k_cache.transpose(-1, -2)) * dim ** -0.5
        scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
        h = h + F.linear(torch.matmul(torch.softmax(scores, -1), v_cache).reshape(rows, heads * dim), o)
        a, b = F.linear(norm(h, n2), gate_up).chunk(2, -1)
        return h + F.linear(F.silu(a) * b, down)

    position = torch.full((rows,), keys - 2)
    args = (torch.randn(rows, hidden), torch.randn(rows, dim), torch.randn(rows, dim), *cache, position,
            torch.arange(keys)[None] <= position[:, None], *w)
    matmuls = best_ms(lambda: [F.linear(args[0], w[2]), F.linear(args[0], w[3][:, :hidden]),
                               F.linear(args[0], w[4]), F.linear(torch.empty(rows, inter), w[5])])
    eager = best_ms(lambda: layer(*args))
    counters.clear()
    start = time.perf_counter()
    compiled = torch.compile(layer, dynamic=False)
    compiled(*args)
    compile_s = time.perf_counter() - start
    return {"rows": rows, "keys": keys, "eager_ms": eager, "compiled_ms": best_ms(lambda: compiled(*args)),
            "matmuls_alone_ms": matmuls, "compile_s": compile_s, "graphs": dict(counters["stats"])}


# --- the household-smol iteration ---------------------------------------------------------------------

def run_iteration(args) -> dict:
    """real_model_speed's clock and floor over an iteration of the preset with policy.engine=pool: the
    pool engine's calls fill the clock (its prefill and decode seconds, prompts and replies)."""
    from benchmarks.speed import real_model_speed as rms

    from agentgym.policies import pool_engine

    clock = rms.PhaseClock()
    rms.install(clock)
    real = pool_engine.PoolEngine.generate_ids

    def generate_ids(engine, prompt_ids, sampling, cache_keys=None, tries=None):
        stats = engine.stats
        before = (stats.prefill_s, stats.prefill_cpu_s, stats.decode_s, stats.decode_cpu_s, stats.decode_context,
                  stats.decode_steps)
        out = real(engine, prompt_ids, sampling, cache_keys, tries)
        clock.seconds["rollout_prefill"] += stats.prefill_s - before[0]
        clock.cpu["rollout_prefill"] += stats.prefill_cpu_s - before[1]
        clock.seconds["rollout_decode"] += stats.decode_s - before[2]
        clock.cpu["rollout_decode"] += stats.decode_cpu_s - before[3]
        clock.decode_context += stats.decode_context - before[4]
        clock.decode_steps += stats.decode_steps - before[5]
        clock.prompts.extend(prompt_ids)
        clock.replies.extend(c.response_ids for c in out)
        clock.prefilled += sum(engine.policy.last_prefill_tokens)
        return out

    pool_engine.PoolEngine.generate_ids = generate_ids
    from agentgym.trainers.config import load_config

    rollout = load_config(args.preset, []).rollout
    decode_rows = rollout.tasks_per_iter * rollout.group_size
    ns = argparse.Namespace(preset=args.preset, model=args.model, iterations=args.iterations,
                            set=["policy.engine=pool", *args.set])
    rows, state = rms.run_iterations(ns, clock, lambda model: rms.measure_rates(model, 1024, decode_rows))
    return {"preset": args.preset, "overrides": ns.set, "timing_overrides": rms.PRESET_TIMING,
            "decode_rows": decode_rows, "iterations": rows, "run_s": state.get("run_s"),
            "iteration_ratio_to_bf16_floor": [r["cpu"]["ratio_to_floor"]["bf16_body_fp32_head"] for r in rows],
            "iteration_ratio_to_fp32_floor": [r["cpu"]["ratio_to_floor"]["fp32"] for r in rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="measure this model shape with random weights (the "
                                                               "tokenizer: --model's) instead of --model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, choices=["fp32", "bf16", "bf16-base"],
                    help="the model's dtype (default: fp32 on a CPU, bf16 on CUDA); bf16-base: LoRA on a bf16 base")
    ap.add_argument("--rows", type=int, nargs="*", default=[16, 64, 256])
    ap.add_argument("--eager-rows", type=int, nargs="*", default=[16, 64])
    ap.add_argument("--groups", type=int, default=4, help="distinct prompts the decode rows continue")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prefill-rows", type=int, default=8)
    ap.add_argument("--iteration", action="store_true", help="also time a household-smol iteration on the pool engine")
    ap.add_argument("--preset", default="household-smol")
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--set", nargs="*", default=[], help="trainer overrides for --iteration (key=value)")
    ap.add_argument("--ab", action="store_true", help="only the two design choices on/off: the draw, torch.compile")
    ap.add_argument("--key", default=None, help="the entry of --out to write (default: cpu or gpu by device)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "engine_speed.json")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.ab:
        result = {"command": command(__file__, sys.argv[1:], env="OMP_NUM_THREADS=1"),
                  "load_average_at_start": os.getloadavg()[0], "sampling": sampling_ab()}
        print(json.dumps(result), flush=True)
        result["torch_compile_one_layer"] = compile_ab()
        print(json.dumps(result["torch_compile_one_layer"]), flush=True)
        previous = json.loads(args.out.read_text()) if args.out.exists() else {}
        args.out.write_text(json.dumps({**previous, args.key or "cpu_design_ab": result}, indent=1) + "\n")
        return
    device = torch.device(args.device)
    dtype_name = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    model = args.model
    if args.shape:
        import tempfile

        model = shape_folder(args.shape, args.model, Path(tempfile.mkdtemp(prefix="engine_shape_")))
    policy = load_policy(model, args.device, dtype_name, lora=False)
    pooled = pooled_copy(policy)
    sizes = model_sizes(policy.model)
    sizes["head_fp32"] = dtype_name == "bf16-base"
    shapes = linear_shapes(policy.model)
    matmul_dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
    bandwidth = gpu_bandwidth(device) if device.type == "cuda" else None
    started = time.perf_counter()
    load = os.getloadavg()[0]

    def floor(rows: int, context: float) -> dict:
        if device.type == "cuda":
            return gpu_step_floor(pooled, sizes, rows, context, bandwidth)
        return cpu_step_floor(sizes, shapes, rows, context, matmul_dtype)

    clock = "cpu" if device.type == "cpu" else "wall"  # a shared CPU: this process's CPU seconds
    decode = []
    for rows in args.rows:
        row = {"engine": "pool", **time_decode(pooled, rows, args.groups, args.context, args.steps, seed=rows)}
        row.update(floor(rows, row["mean_context"]))
        row["ratio_to_floor"] = row[f"ms_per_step_{clock}"] / 1e3 / row["floor_s"]
        print(json.dumps(row), flush=True)
        decode.append(row)
        pooled.forget()
    for rows in args.eager_rows:
        row = {"engine": "hf", **time_decode(policy, rows, args.groups, args.context, args.steps, seed=rows)}
        row.update(floor(rows, row["mean_context"]))
        row["ratio_to_floor"] = row[f"ms_per_step_{clock}"] / 1e3 / row["floor_s"]
        print(json.dumps(row), flush=True)
        decode.append(row)
    prefill = time_prefill(pooled, args.prefill_rows, args.context, seed=0) if args.prefill_rows else {}
    if prefill and device.type == "cpu":
        prefill["floor_s"] = prefill_floor(sizes, shapes, prefill["tokens"], args.context, args.prefill_rows,
                                           matmul_dtype)
        prefill["ratio_to_floor"] = prefill["cpu_s"] / prefill["floor_s"]
    print(json.dumps(prefill), flush=True)
    pool = [r for r in decode if r["engine"] == "pool"]
    entry = {
        "command": command(__file__, sys.argv[1:], env="OMP_NUM_THREADS=1"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "model": f"{args.shape} shape, random weights" if args.shape else args.model, "dtype": dtype_name, "torch_threads": torch.get_num_threads(),
        "load_average_at_start": load, "clock": clock,
        "decode_tokens_per_s_by_rows": {str(r["rows"]): r[f"tokens_per_s_{clock}"] for r in pool},
        "decode_ms_per_step_by_rows": {str(r["rows"]): r[f"ms_per_step_{clock}"] for r in pool},
        "decode_ratio_to_floor": {str(r["rows"]): r["ratio_to_floor"] for r in pool},
        "eager_decode_ratio_to_floor": {str(r["rows"]): r["ratio_to_floor"] for r in decode if r["engine"] == "hf"},
        "prefill_tokens_per_s": prefill.get(f"tokens_per_s_{clock}"),
        "prefill_ratio_to_floor": prefill.get("ratio_to_floor"),
        "decode": decode, "prefill": prefill,
        "pool": {"slots": pooled.pool_engine.pool.slots, "length": pooled.pool_engine.pool.length,
                 "grown": pooled.pool_engine.pool.grown, "graph_captures": pooled.pool_engine.stats.captures},
    }
    if args.iteration:
        del policy, pooled
        if device.type == "cuda":
            torch.cuda.empty_cache()
        iteration = run_iteration(args)
        entry["iteration"] = iteration
        entry["iteration_ratio_to_bf16_floor"] = iteration["iteration_ratio_to_bf16_floor"]
    entry["run_s"] = time.perf_counter() - started
    key = args.key or ("gpu" if device.type == "cuda" else "cpu")
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    if not args.rows:  # an iteration alone: the entry's speed figures stay as an earlier run wrote them
        entry = {k: v for k, v in entry.items() if k in ("iteration", "iteration_ratio_to_bf16_floor")}
        entry["iteration_command"] = command(__file__, sys.argv[1:], env="OMP_NUM_THREADS=1")
    args.out.write_text(json.dumps({**previous, key: {**previous.get(key, {}), **entry}}, indent=1) + "\n")
    print(f"wrote {args.out} [{key}]")


if __name__ == "__main__":
    main()
