"""One PPO update on a fixed batch per variant, in one process or as a torchrun rank
(tests/trainers/test_data_parallel.py).

    python dp_worker.py MODEL_DIR BATCH.pkl OUT GROUP_SIZE [--fsdp] [--variants=V,...] [--device=cuda]
    torchrun --standalone --nproc-per-node 2 dp_worker.py MODEL_DIR BATCH.pkl OUT GROUP_SIZE [--fsdp] [--variants=V,...]

Variants: full (every weight trained, grpo), lora (a fresh r=4 adapter), value-head (gae's value head
beside every weight). Without --variants, one `full` update is written to OUT (a .pt file); with
them, each variant's update to OUT/VARIANT.pt, one after another in the same process group: the
interpreter, torch's import and the rendezvous are paid once, not once per variant. A listed
variant may name its own layout or batch after a colon: `full:ddp` and `full:fsdp` (whatever
--fsdp says), `full:2` (the first 2 groups only); it is written to OUT/VARIANT-OPTION.pt.

BATCH.pkl holds (trajectories, advantages) of whole groups in order. Each rank takes its block of
groups (trainers.distributed.DataParallel.shard); rank 0 writes the parameters after the update.
"""

import pickle
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)

from agentgym.policies.hf import HFPolicy  # noqa: E402
from agentgym.trainers import distributed  # noqa: E402
from agentgym.trainers.config import load_config  # noqa: E402
from agentgym.trainers.training import ppo_update, update_clip  # noqa: E402
from agentgym.trainers.run_setup import build_heads, make_optimizer  # noqa: E402
from agentgym.trainers.samples import build_samples  # noqa: E402

VARIANTS = ("full", "lora", "value-head")


def update(model: str, trajs: list, advs: list, group_size: int, variant: str, fsdp: bool, device: str):
    """The variant's update on this rank's block of groups: (dp, what rank 0 writes)."""
    groups = len(trajs) // group_size
    estimator = "gae" if variant == "value-head" else "grpo"
    cfg = load_config({}, [f"policy.model={model}", f"estimator.name={estimator}", f"rollout.tasks_per_iter={groups}",
                           f"rollout.group_size={group_size}", "ppo.minibatch_size=8", "ppo.micro_batch_size=3",
                           "ppo.epochs=2", "ppo.lr=1e-3", "data_parallel=" + ("fsdp" if fsdp else "ddp"),
                           f"policy.device={device}"])
    dp = distributed.setup(cfg)  # joins the process group once; later variants find it joined
    mine, first = dp.shard(list(range(groups)))
    trajs = trajs[first * group_size:(first + len(mine)) * group_size]
    advs = advs[first * group_size:(first + len(mine)) * group_size]
    torch.manual_seed(0)  # the same fresh LoRA adapter in every run
    policy = HFPolicy(model, lora={"r": 4} if variant == "lora" else None, device=cfg.policy.device)
    heads = build_heads(cfg.estimator, policy)  # a value head with value-head
    dp.broadcast_parameters(policy, heads)
    dp.shard_model(policy)
    returns = [a + 0.5 for a in advs] if heads else None  # made-up value targets
    samples = dp.global_samples(build_samples(trajs, advs, returns=returns))
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    stats = ppo_update(cfg.ppo, update_clip(cfg.ppo, cfg.estimator.name), policy, optimizer, scheduler, samples,
                       np.random.default_rng(0), 0, heads.get("value"), dp=dp)
    held = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in policy.model.parameters())
    if dp.sharded:
        from agentgym.trainers.fsdp import full_state_dict

        params = full_state_dict(policy.model)  # every rank takes part in the gather
    else:
        params = {n: p.detach().cpu().clone() for n, p in policy.model.named_parameters()}
    params.update({f"value_head.{n}": p.detach().clone() for n, p in (heads["value"].named_parameters() if heads else [])})
    return dp, {"params": params, "stats": stats, "local_samples": len(dp.local(samples)),
                "world_size": dp.world_size, "numel_held": held}


flags = {a for a in sys.argv[1:] if a.startswith("--")}
device = next((a.split("=", 1)[1] for a in flags if a.startswith("--device=")), "cpu")
listed = next((a.split("=", 1)[1].split(",") for a in flags if a.startswith("--variants=")), None)
runs = [entry.partition(":")[::2] for entry in listed or ["full"]]  # (variant, option)
unknown = {f"{v}:{o}" if o else v for v, o in runs
           if v not in VARIANTS or not (o in ("", "ddp", "fsdp") or o.isdigit())}
if unknown:
    sys.exit(f"dp_worker: unknown variants {sorted(unknown)}: use {', '.join(VARIANTS)}, each with an optional "
             ":ddp, :fsdp or :NUM_GROUPS")
args = [a for a in sys.argv[1:] if not a.startswith("--")]
model, data, out, group_size = args[0], args[1], Path(args[2]), int(args[3])
trajs, advs = pickle.load(open(data, "rb"))
dp = None
for variant, option in runs:
    sharded = option == "fsdp" or ("--fsdp" in flags and option != "ddp")
    groups = int(option) * group_size if option.isdigit() else len(trajs)
    dp, result = update(model, trajs[:groups], advs[:groups], group_size, variant, sharded, device)
    if dp.is_main:
        path = out / (f"{variant}-{option}.pt" if option else f"{variant}.pt") if listed else out
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(result, path)
distributed.teardown(dp)
distributed.exit_rank(0)
