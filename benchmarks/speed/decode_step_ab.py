"""A decode step of a real model before and after its two speed changes, in one process (issue 54):

* attention of one query per row as two matmuls (policies/decode_attention.py) instead of torch's
  sdpa kernel (which the bf16 base ran in fp32: its fastest single-query form);
* admissible-only decoding reading only the allowed ids' columns of the LM head and sampling among
  them (policies/hf.py: _head_restricted_to, _allowed_columns) instead of the 49k-column head, a
  mask over the vocabulary and a sample over all of it.

Part 1 times attention alone at SmolLM2's shapes. Part 2 plays the same prompts with the LoRA
policy (frozen base in bf16, as household-smol trains), "before" and "after" alternating, 3 rounds,
at 4 and 16 rows, admissible-only and free; CPU seconds per generate call and per decode step.
Writes docs/real_model_speed.json["decode_step_ab"].

    OMP_NUM_THREADS=1 python benchmarks/speed/decode_step_ab.py [--model smollm2-135m-instruct] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
ACTIONS = ["go to countertop 1", "go to countertop 2", "go to fridge 1", "go to toaster 1", "go to sinkbasin 1",
           "go to cabinet 1", "go to drawer 1", "examine countertop 1", "look", "inventory"]
PROMPT = [{"role": "system", "content": "You are an agent in a household. Reply with exactly one admissible action."},
          {"role": "user", "content": "You are in the middle of a kitchen. Looking quickly around you, you see "
           "a countertop 1, a countertop 2, a fridge 1, a toaster 1, a sinkbasin 1, a cabinet 1 and a drawer 1.\n"
           "Your task is to: put a butterknife in the toaster.\nAdmissible actions: " + ", ".join(ACTIONS)}]


def cpu_ms(fn, rounds: int = 200) -> float:
    for _ in range(5):
        fn()
    start = time.process_time()
    for _ in range(rounds):
        fn()
    return (time.process_time() - start) / rounds * 1e3


def attention_alone() -> list[dict]:
    from agentgym.policies.decode_attention import single_query_attention

    rows_out = []
    for rows, keys in [(4, 130), (16, 130), (16, 400)]:
        query, key, value = torch.randn(rows, 9, 1, 64), torch.randn(rows, 3, keys, 64), torch.randn(rows, 3, keys, 64)
        mask = torch.ones(rows, 1, 1, keys, dtype=torch.bool)
        mask[:, :, :, :5] = False
        sdpa = cpu_ms(lambda: F.scaled_dot_product_attention(query, key.repeat_interleave(3, 1),
                                                             value.repeat_interleave(3, 1), attn_mask=mask, scale=0.125))
        matmuls = cpu_ms(lambda: single_query_attention(query, key, value, mask, 0.125))
        rows_out.append({"rows": rows, "keys": keys, "sdpa_ms": round(sdpa, 3), "single_query_ms": round(matmuls, 3)})
        print(f"attention, {rows} rows x {keys} keys: sdpa {sdpa:.2f} ms, two matmuls {matmuls:.2f} ms per layer")
    return rows_out


def _sdpa_in_fp32(module, query, key, value, attention_mask, **kwargs):
    """What a bf16 base's decode step ran before: transformers' sdpa on fp32 copies of a single query."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[2] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    with torch.autocast(query.device.type, enabled=False):
        out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask,
                                              **kwargs)
    return out.to(query.dtype), weights


def policy_ab(model: str, rounds: int) -> list[dict]:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    import agentgym.policies.hf as hf
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.decode_attention import NAME
    from agentgym.trainers.precision import bf16_rollout

    policy = hf.HFPolicy(model, lora={"r": 16})
    print(bf16_rollout("bf16", policy, "hf"))
    AttentionInterface.register("before", _sdpa_in_fp32)
    AttentionMaskInterface.register("before", sdpa_mask)
    allowed_columns = hf._allowed_columns
    ids = policy.encode_prompt(PROMPT)
    replies = [policy.encode_response(a) for a in ACTIONS]

    def use(way: str) -> None:
        policy.model.get_base_model().set_attn_implementation(NAME if way == "after" else "before")
        hf._allowed_columns = allowed_columns if way == "after" else (lambda nodes, device: None)

    results = []
    for rows in (4, 16):
        for mode in ("admissible", "free"):
            times: dict[str, list[float]] = {"before": [], "after": []}
            steps: dict[str, list[int]] = {"before": [], "after": []}
            for r in range(rounds):
                for way in ("before", "after"):
                    use(way)
                    policy.reseed(r)
                    sampling = SamplingParams(temperature=1.0, max_new_tokens=24)
                    start = time.process_time()
                    out = policy.generate_ids([ids] * rows, sampling,
                                              allowed_replies=[replies] * rows if mode == "admissible" else None)
                    times[way].append(time.process_time() - start)
                    steps[way].append(max(len(c.response_ids) for c in out))
            row = {"rows": rows, "mode": mode, "prompt_tokens": len(ids), "cpu_s": times, "decode_steps": steps,
                   "speedup": round(min(times["before"]) / min(times["after"]), 2)}
            results.append(row)
            print(f"{rows} rows, {mode}: before {min(times['before']):.2f} s, after {min(times['after']):.2f} s "
                  f"(best of {rounds}; steps {steps['before']} / {steps['after']}): {row['speedup']:.2f}x")
    use("after")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "real_model_speed.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    result = {"command": command(__file__, sys.argv[1:], env="OMP_NUM_THREADS=1"),
              "note": "CPU seconds of this process (1 torch thread) on a 2-core machine shared with other jobs; a "
                      "generate call is the prefill of one prompt (identical rows are prefilled once) and up to 24 "
                      "decode steps at temperature 1",
              "attention_per_layer": attention_alone(), "generate": policy_ab(args.model, args.rounds)}
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    args.out.write_text(json.dumps({**previous, "decode_step_ab": result}, indent=1) + "\n")
    print(f"wrote {args.out} ('decode_step_ab')")


if __name__ == "__main__":
    main()
