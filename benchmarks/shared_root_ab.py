"""The minibatch's shared root (trainers/shared_prefix.py, SharedRoot) on a real model: the update's
CPU seconds and its gradient against the plain pass and an fp32 reference.

SmolLM2-135M-Instruct with LoRA r=16 and the bf16 base (ppo.matmul_dtype=bf16, the household-smol
preset's setting), per-step samples shaped like the preset's (a 280-token system prompt, 110-120 more
prompt tokens, 6 reply tokens; a group's episodes share their first prompt), one ppo_update per arm
(minibatches of 32, micro-batches of 4, lr 0 so every arm sees the same weights):

    plain    share_prefixes=false
    noroot   shared prefixes per micro-batch (what main did before the root)
    root     shared prefixes with the minibatch's root computed once
    truth    the plain pass in fp32 on the same bf16-rounded weights (the reference)

Prints each arm's CPU seconds, the tokens it computed (share of the plain pass's), and each gradient's
distance to the reference (relative norm). LoRA's B starts small and random (a trained adapter);
--zero-b keeps peft's zero init, where the bf16 gradient is ill-conditioned for every path
(docs/real_model_speed.md).

Usage: OMP_NUM_THREADS=1 python benchmarks/shared_root_ab.py [--samples 16] [--seed 0] [--zero-b] [--one-task]
           [--fp32-attention] [--lora-top-layers K]
"""

import argparse
import contextlib
import time

import numpy as np
import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--samples", type=int, default=16)
parser.add_argument("--minibatch", type=int, default=32, help="ppo.minibatch_size (the preset's: 32)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--zero-b", action="store_true", help="LoRA's B at peft's zero init")
parser.add_argument("--one-task", action="store_true", help="the first task's samples only (one group)")
parser.add_argument("--fp32-attention", action="store_true", help="attention with autocast off, inputs in fp32")
parser.add_argument("--model", default="smollm2-135m-instruct")
parser.add_argument("--lora-top-layers", type=int, default=None,
                    help="policy.lora.top_layers: adapters on the last K decoder layers only (default: all 30)")
args = parser.parse_args()
torch.set_num_threads(1)
if args.fp32_attention:
    import transformers.integrations.sdpa_attention as sdpa

    _sdpa = sdpa.sdpa_attention_forward

    def fp32_attention(module, q, k, v, mask, **kwargs):
        with torch.autocast("cpu", enabled=False):
            return _sdpa(module, q.float(), k.float(), v.float(), mask, **kwargs)

    sdpa.sdpa_attention_forward = fp32_attention

from agentgym.policies.hf import HFPolicy
from agentgym.trainers import learner
from agentgym.trainers import shared_prefix as sp
from agentgym.trainers.config import PPOConfig
from agentgym.trainers.samples import make_samples, TokenSequence
lora = {"r": 16, "lora_alpha": 32, "target_modules": "all-linear"}
pol = HFPolicy(args.model, device="cpu", lora=lora if args.lora_top_layers is None else
               {**lora, "top_layers": args.lora_top_layers})
pol.keep_base_in_bf16()
# LoRA B != 0 (a trained adapter, not the zero init): small random values
g = torch.Generator().manual_seed(1)
for n, p in ([] if args.zero_b else pol.model.named_parameters()):
    if "lora_B" in n:
        p.data = torch.randn(p.shape, generator=g) * 0.01
N = args.samples
rng = np.random.default_rng(args.seed)
system = list(rng.integers(100, 40000, 280))
seqs = []
for task in range(8):
    first = list(rng.integers(100, 40000, 110))
    for ep in range(4):
        for step in range(4):
            prompt = system + (first if step == 0 else list(rng.integers(100, 40000, 120)))
            reply = list(rng.integers(100, 40000, 6))
            n = len(prompt) + 6
            seqs.append(TokenSequence(input_ids=prompt + reply, loss_mask=[0] * len(prompt) + [1] * 6, old_logprobs=[0.0] * n,
                                      value_positions=[len(prompt) - 1], response_ends=[n - 1], step_refs=[(len(seqs), 0)]))
order = np.arange(N) if args.one_task else rng.permutation(len(seqs))[:N]
seqs = [seqs[i] for i in order]
for k, s_ in enumerate(seqs): s_.step_refs = [(k, 0)]
with torch.autocast("cpu", dtype=torch.bfloat16):
    scored = learner.score_sequences(pol, seqs, 4, False)
for s_, (lp, _) in zip(seqs, scored):
    s_.old_logprobs = [0.0] + lp.tolist()
samples = make_samples(seqs, [[float(rng.normal())] for _ in seqs])
real_root_length = sp.shared_root_length
res = {}
for arm in ("plain", "noroot", "root", "truth"):
    learner.shared_root_length = real_root_length if arm == "root" else (lambda items: 0)
    dt = "bf16"
    if arm == "truth":
        pol.model.float(); pol.matmul_context = contextlib.nullcontext; dt = "fp32"
    params = pol.trainable_parameters()
    for p in params: p.grad = None
    pc = PPOConfig(epochs=1, minibatch_size=args.minibatch, micro_batch_size=4, matmul_dtype=dt,
                   share_prefixes=arm in ("noroot", "root"), max_grad_norm=1e9)
    opt = torch.optim.SGD(params, lr=0.0); sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    t = time.process_time()
    st = learner.ppo_update(pc, (0.8, 1.2), pol, opt, sch, samples, np.random.default_rng(1), 0)
    res[arm] = torch.cat([p.grad.flatten() for p in params]).clone()
    print(arm, f"{time.process_time() - t:.1f} CPU s", "token ratio", round(st.get("shared_prefix_token_ratio", 1), 3), flush=True)
t = res["truth"]
print("vs fp32 reference:", {a: round(float((res[a] - t).norm() / t.norm()), 4) for a in ("plain", "noroot", "root")},
      "| root vs plain", round(float((res["root"] - res["plain"]).norm() / res["plain"].norm()), 4))
