"""The rollout with LoRA's frozen base in bf16 (ppo.matmul_dtype=bf16) on / off, in one process.

The SmolLM2-135M policy with a fresh LoRA (r=16) and a copy whose frozen base is stored in bf16
(HFPolicy.keep_base_in_bf16: rollout in bf16, LM head fp32, a decode step's attention fp32) sample
the same prompts with the same seed, alternating, `--rounds` times: a prefill-heavy batch (4
chat prompts of ~130 tokens, 16 new tokens) and a decode-heavy one (4 prompts of 8 tokens, 48 new).
Printed and written: CPU s per round of each, and the first PPO ratio each rollout would see
(the largest |ratio - 1| over its sampled tokens when the update recomputes their logprobs: fp32
rollout with an fp32 or a bf16 update, bf16 rollout with a bf16 update).

Usage: OMP_NUM_THREADS=1 python benchmarks/speed/rollout_bf16_onoff.py [--out runs/rollout_bf16_onoff.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.speed.ways import bf16_base_copy, first_ratio  # noqa: E402  (benchmarks/speed/ways.py)

MESSAGES = [
    {"role": "system", "content": "You are in a household. Reply with one admissible action."},
    {"role": "user", "content": "Your task: examine the watch with the desklamp.\nYou arrive at sidetable 1. On the "
     "sidetable 1, you see a box 1, and a desklamp 1.\nAdmissible actions: examine sidetable 1, go to coffeetable 1, "
     "go to safe 1, go to sofa 1, inventory, look, take box 1 from sidetable 1, use desklamp 1"},
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="runs/rollout_bf16_onoff.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy

    plain = HFPolicy(args.model, lora={"r": 16})
    fast = bf16_base_copy(plain)
    base = plain.encode_prompt(MESSAGES)
    batches = {
        f"prefill-heavy (4 prompts of ~{len(base)} tokens, 16 new)":
            ([base, base[:-3] + base[-2:], base[4:], base[:-5] + base[-4:]], 16),
        "decode-heavy (4 prompts of 8 tokens, 48 new)": ([base[:8], base[3:11], base[5:13], base[9:17]], 48),
    }
    out = {}
    for label, (prompts, new_tokens) in batches.items():
        sampling = SamplingParams(temperature=1.0, max_new_tokens=new_tokens, seed=0)
        cpu: dict = {"fp32": [], "bf16": []}
        completions: dict = {}
        for _ in range(args.rounds):
            for name, policy in (("fp32", plain), ("bf16", fast)):
                start = time.process_time()
                completions[name] = policy.generate_ids(prompts, sampling)
                cpu[name].append(round(time.process_time() - start, 2))
        out[label] = {
            "cpu_s": cpu, "sampled": [sum(len(c.response_ids) for c in completions[k]) for k in ("fp32", "bf16")],
            "first_ratio_dev": {
                "fp32 rollout, fp32 update": first_ratio(plain, prompts, completions["fp32"], "fp32"),
                "fp32 rollout, bf16 update": first_ratio(plain, prompts, completions["fp32"], "bf16"),
                "bf16 rollout (bf16 base), bf16 update": first_ratio(fast, prompts, completions["bf16"], "bf16")}}
        print(label, json.dumps(out[label]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
