"""The update with and without the rollout's frozen-layer outputs (policies/frozen_states.py), on a real
model with LoRA on its top layers: CPU seconds, gradient and first PPO ratio.

SmolLM2-135M-Instruct, LoRA r=16 on the last --top-layers decoder layers, the bf16 base
(ppo.matmul_dtype=bf16, the household-smol preset's setting); LoRA's B small and random (a trained
adapter). One rollout of the preset's shape (household's two easy categories, history 1,
admissible-only decoding at temperature 1, per-step samples) records the states; then ppo_update at
lr 0 runs twice per arm, alternating: `frozen` (the update starts at the lowest adapted layer from
the recorded states) and `recompute` (it runs every layer). Prints each pass's CPU seconds, the first
minibatch's max ratio, and the gradients' distance (relative norm) between the arms and within one.

Usage: OMP_NUM_THREADS=1 python benchmarks/speed/frozen_states_ab.py [--top-layers 6] [--tasks 4] [--group 4]
"""

import argparse
import time

import numpy as np
import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="smollm2-135m-instruct")
parser.add_argument("--top-layers", type=int, default=6)
parser.add_argument("--tasks", type=int, default=4)
parser.add_argument("--group", type=int, default=4)
parser.add_argument("--max-turns", type=int, default=6)
args = parser.parse_args()
torch.set_num_threads(1)

import agentgym  # noqa: E402
from agentgym.policies.base import SamplingParams  # noqa: E402
from agentgym.policies.hf import HFPolicy  # noqa: E402
from agentgym.trainers import learner  # noqa: E402
from agentgym.trainers.config import PPOConfig, load_config  # noqa: E402
from agentgym.trainers.samples import make_samples, tokenize_trajectories  # noqa: E402

policy = HFPolicy(args.model, lora={"r": 16, "lora_alpha": 32, "target_modules": "all-linear",
                                    "top_layers": args.top_layers})
policy.keep_base_in_bf16()
generator = torch.Generator().manual_seed(1)
for name, param in policy.model.named_parameters():
    if "lora_B" in name:
        param.data = torch.randn(param.shape, generator=generator) * 0.01
store = policy.keep_frozen_states()
preset = load_config("household-smol", [])
space = agentgym.get_task_space(preset.env.id)
tasks = [t for t in space.split("train") if t.params.get("task_type") in ("pick_and_place", "look_at_obj_in_light")
         and t.params.get("num_receptacles", 99) <= 4][: args.tasks]
store.recording = True
start = time.process_time()
with torch.autocast("cpu", dtype=torch.bfloat16):
    trajectories = agentgym.collect(preset.env.id, tasks, policy, args.group, seed=5, chat={"history": 1},
                                    max_turns=args.max_turns,
                                    sampling=SamplingParams(temperature=1.0, max_new_tokens=24, seed=11,
                                                            admissible_only=True))
store.recording = False
rng = np.random.default_rng(0)
samples = make_samples(tokenize_trajectories(trajectories, "per-step"),
                       [rng.normal(size=len(t.steps)) for t in trajectories])
print(f"rollout {time.process_time() - start:.1f} CPU s: {len(samples)} samples, {sum(len(s) for s in samples)} tokens, "
      f"states kept for {len(store)} distinct sequences (frozen layers 0..{store.layer - 1})")
grads: dict[str, list] = {"frozen": [], "recompute": []}
for arm in ("frozen", "recompute", "frozen", "recompute"):
    params = policy.trainable_parameters()
    for param in params:
        param.grad = None
    pc = PPOConfig(epochs=1, minibatch_size=32, micro_batch_size=4, matmul_dtype="bf16",
                   reuse_frozen_states=arm == "frozen")
    optimizer = torch.optim.SGD(params, lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    start = time.process_time()
    stats = learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
    seconds = time.process_time() - start
    grads[arm].append(torch.cat([p.grad.flatten().float() for p in params if p.grad is not None]))
    print(f"{arm:9s} update {seconds:.1f} CPU s, samples from the states {stats.get('frozen_states_samples', 0)}, "
          f"first minibatch's max ratio {stats['ratio_max_first_minibatch']:.4f}")


def distance(a, b) -> float:
    return float((a - b).norm() / b.norm())


print(f"gradient, frozen vs recompute: {distance(grads['frozen'][0], grads['recompute'][0]):.4f}; "
      f"recompute vs itself: {distance(grads['recompute'][1], grads['recompute'][0]):.4f}")
