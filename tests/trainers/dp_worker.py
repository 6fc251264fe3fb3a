"""One PPO update on a fixed batch, in one process or as a torchrun rank (tests/trainers/test_data_parallel.py).

    python dp_worker.py MODEL_DIR BATCH.pkl OUT.pt GROUP_SIZE [NUM_GROUPS]
    torchrun --standalone --nproc-per-node 2 dp_worker.py MODEL_DIR BATCH.pkl OUT.pt GROUP_SIZE

BATCH.pkl holds (trajectories, advantages) of whole groups in order. Each rank takes its block of
groups (trainers.distributed.DataParallel.shard); rank 0 writes the parameters after the update.
"""

import pickle
import sys

import numpy as np
import torch

torch.set_num_threads(1)

from agentgym.policies.hf import HFPolicy  # noqa: E402
from agentgym.trainers import distributed  # noqa: E402
from agentgym.trainers.config import load_config  # noqa: E402
from agentgym.trainers.loop import ppo_update  # noqa: E402
from agentgym.trainers.setup import make_optimizer  # noqa: E402
from agentgym.trainers.tokenize import build_samples  # noqa: E402

model, data, out, group_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
trajs, advs = pickle.load(open(data, "rb"))
if len(sys.argv) > 5:  # a smaller batch, for the test's sensitivity check
    trajs, advs = trajs[: int(sys.argv[5]) * group_size], advs[: int(sys.argv[5]) * group_size]
groups = len(trajs) // group_size
cfg = load_config({}, [f"policy.model={model}", "estimator.name=grpo", f"rollout.tasks_per_iter={groups}",
                       f"rollout.group_size={group_size}", "ppo.minibatch_size=8", "ppo.micro_batch_size=3",
                       "ppo.epochs=2", "ppo.lr=1e-3"])
dp = distributed.setup(cfg)
mine, first = dp.shard(list(range(groups)))
trajs = trajs[first * group_size:(first + len(mine)) * group_size]
advs = advs[first * group_size:(first + len(mine)) * group_size]
policy = HFPolicy(model)
dp.broadcast_parameters(policy, {})
samples = dp.global_samples(build_samples(trajs, advs))
optimizer, scheduler = make_optimizer(cfg, policy, {})
stats = ppo_update(cfg, policy, optimizer, scheduler, samples, np.random.default_rng(0), 0)
if dp.is_main:
    torch.save({"params": {n: p.detach().clone() for n, p in policy.model.named_parameters()}, "stats": stats,
                "local_samples": len(dp.local(samples)), "world_size": dp.world_size}, out)
distributed.teardown()
