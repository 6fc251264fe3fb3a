"""Scaling the trainer: data-parallel training over torch.distributed, and the Ray set-up.

Data parallel (`torchrun --nproc-per-node N -m agentgym.trainers.cli train CONFIG`, or
`agentgym train CONFIG --nproc N`), one process per rank, gloo on CPU and nccl on CUDA:

- every rank draws the same tasks from the task source (same seed, same state), then plays a
  contiguous block of them: rank r gets groups [r*G/N, (r+1)*G/N). A group never spans ranks,
  so group-relative advantages (GRPO, RLOO, GiGPO's anchor groups) are computed locally and are
  exactly the single-process ones. Group g is reset with seed `base + g` whatever rank plays it.
- the update sees the global batch: each rank holds its own samples plus size-only stand-ins
  ("ghosts") for the other ranks' samples, in rank order, so the minibatch permutation, the
  token-mean denominators and the number of optimizer steps are those of one process on the
  combined batch; a rank computes gradients only for its own samples, and the gradients are
  summed over ranks (one all-reduce of a flat buffer per optimizer step, the reduction DDP
  performs) before clipping and the optimizer step. Ranks hold uneven sample counts (episodes
  differ in length), which DDP's per-backward hooks cannot handle without Join; the explicit
  all-reduce can, and every rank steps identically, so parameters stay equal on all ranks.
- rank 0 builds the tiny model / SFT warm start (the others wait and load it), evaluates,
  logs and checkpoints; the checkpoint also stores every rank's RNG state, so resume is exact
  for the same world size. The trajectories of all ranks are gathered for the task source's
  update (curricula) and the logged rollout metrics.

With `data_parallel: fsdp` the ranks hold shards of the model instead of replicas
(trainers/fsdp.py); everything above stays true.

torch and ray are imported lazily.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agentgym.errors import ConfigError
from agentgym.executors import make_run_pool
from agentgym.executors import needs_ray_cluster as executor_needs_ray_cluster
from agentgym.policies.engines import needs_ray_cluster as engine_needs_ray_cluster

from agentgym.trainers.checks import check_world  # noqa: F401  (the data-parallel limits live with the other rules)
from agentgym.trainers import fsdp
from agentgym import executors_ray  # executors_ray.check_resources: tests swap it for a fake cluster


def world_from_env() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) as torchrun sets them; (0, 1, 0) otherwise."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)))


# --- the data-parallel context -----------------------------------------------------------------
@dataclass
class Ghost:
    """Another rank's sample, by size only: counts toward denominators and the permutation."""

    length: int
    num_loss_tokens: int
    value_targets: list

    def __len__(self) -> int:
        return self.length


class DataParallel:
    """What the loop asks of data parallelism; with world_size 1 every method is a no-op."""

    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0, sharded: bool = False):
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.enabled = world_size > 1
        self.sharded = sharded and self.enabled  # data_parallel=fsdp (trainers/fsdp.py)
        self.is_main = rank == 0
        self.first_group = 0

    # FSDP: the model in shards; rollouts, scoring and evaluation on the gathered weights
    def shard_model(self, policy) -> None:
        if self.sharded:
            fsdp.shard_model(policy.model)

    def full_weights(self, policy):
        """A `with` block run on the full weights; every rank must enter it (no-op without FSDP)."""
        if not self.sharded:
            return nullcontext()

        return fsdp.full_weights(policy.model)

    # rollouts
    def shard(self, tasks: list) -> tuple[list, int]:
        """This rank's contiguous block of groups and the global index of its first group."""
        if not self.enabled:
            return list(tasks), 0
        n = len(tasks)
        lo, hi = n * self.rank // self.world_size, n * (self.rank + 1) // self.world_size
        self.first_group = lo
        return list(tasks[lo:hi]), lo

    def sampling(self, sampling):
        """Each rank its own sampling stream (the same seed would correlate the ranks' noise)."""
        if self.enabled and sampling.seed is not None:
            sampling.seed = int(sampling.seed) + self.rank
        return sampling

    def gather(self, trajectories: list, advantages: list) -> tuple[list, list]:
        """Every rank's trajectories and advantages, in rank (= task) order, on every rank."""
        if not self.enabled:
            return trajectories, advantages
        import torch.distributed as dist

        for t in trajectories:  # collect numbers groups from 0 on every rank: make the ids global
            g, sep, rest = t.group_id.partition(":")
            if sep and g.isdigit():
                t.group_id = f"{int(g) + self.first_group}:{rest}"
        parts: list = [None] * self.world_size
        dist.all_gather_object(parts, (trajectories, advantages))
        return [t for p in parts for t in p[0]], [a for p in parts for a in p[1]]

    # update
    def global_samples(self, samples: list) -> list:
        """This rank's samples with ghosts for the others', in rank order."""
        if not self.enabled:
            return samples
        import torch.distributed as dist

        shapes = [(len(s), s.num_loss_tokens, len(s.value_targets)) for s in samples]
        parts: list = [None] * self.world_size
        dist.all_gather_object(parts, shapes)
        out: list = []
        for r, part in enumerate(parts):
            out.extend(samples if r == self.rank else [Ghost(n, k, [0.0] * v) for n, k, v in part])
        return out

    def local(self, minibatch: list) -> list:
        return [s for s in minibatch if not isinstance(s, Ghost)] if self.enabled else minibatch

    def keep_step(self, policy, micro_batches: int, want_entropy: bool, use_kl: bool) -> None:
        """FSDP, before this rank's `micro_batches` passes of a minibatch: run empty ones so that
        it runs as many passes as the rank with the most (FSDP's collectives must pair up)."""
        if not self.sharded:
            return
        import torch
        import torch.distributed as dist

        most = torch.tensor([micro_batches])
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        for _ in range(int(most[0]) - micro_batches):
            fsdp.filler_pass(policy, want_entropy, use_kl)

    def sync_gradients(self, params: list) -> None:
        """Sum the gradients over ranks (missing ones count as zeros): one flat all-reduce. Under
        FSDP only the plain parameters (heads): the sharded ones were reduced in backward."""
        if not self.enabled:
            return
        import torch
        import torch.distributed as dist

        if self.sharded:
            params = fsdp.split_by_kind(params)[1]
            if not params:
                return

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.detach().reshape(-1).float() for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            p.grad = flat[offset:offset + n].view_as(g).to(g.dtype).clone()
            offset += n

    def clip_grad_norm(self, params: list, max_norm: float):
        if self.sharded:
            return fsdp.clip_grad_norm(params, max_norm)
        import torch

        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def reduce_stats(self, totals: dict, n_micro: int, ratio_max: float) -> tuple[dict, int, float]:
        """Sum the per-rank partial loss statistics (each is a share of the global loss)."""
        if not self.enabled:
            return totals, n_micro, ratio_max
        import torch
        import torch.distributed as dist

        keys = sorted(k for k in totals if k != "grad_norm")
        t = torch.tensor([totals[k] for k in keys] + [float(n_micro)], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        m = torch.tensor([ratio_max], dtype=torch.float64)
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        out = dict(totals)
        out.update({k: float(v) for k, v in zip(keys, t[:-1].tolist())})
        return out, int(t[-1]), float(m[0])

    # control
    def agree(self, flag: bool) -> bool:
        """True on every rank when it is true on any (time budget: all ranks stop together)."""
        if not self.enabled:
            return bool(flag)
        import torch
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t[0] > 0)

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def on_main(self, fn: Callable[..., Any], *args: Any, otherwise: Any = None, **kwargs: Any) -> Any:
        """fn(*args, **kwargs) on rank 0 (what one process writes: records, logs, the summary);
        `otherwise` on the other ranks. The loop calls this instead of branching on the rank."""
        return fn(*args, **kwargs) if self.is_main else otherwise

    def main_first(self, fn: Callable[[], Any]) -> Any:
        """Rank 0 runs fn (which writes files), then the others (which find them and reuse them)."""
        if not self.enabled:
            return fn()
        out = fn() if self.is_main else None
        self.barrier()
        return out if self.is_main else fn()

    def broadcast_parameters(self, policy, heads: dict) -> None:
        """Rank 0's parameters everywhere (as DDP does at construction)."""
        if not self.enabled:
            return
        import torch
        import torch.distributed as dist

        modules = [policy.model] + [h for h in heads.values() if h is not None]
        with torch.no_grad():
            for module in modules:
                for p in module.parameters():
                    dist.broadcast(p.data, src=0)

    # checkpoints
    def _rng_state(self, policy) -> dict:
        from agentgym.trainers.checkpoint import policy_sampling_state, rng_state  # lazy: needs torch

        return {"rng": rng_state(), **policy_sampling_state(policy)}

    def save_checkpoint(self, save_fn: Callable, run_dir, iteration: int, policy, optimizer, scheduler, heads: dict,
                        state: dict) -> None:
        """Rank 0 writes the checkpoint plus every rank's RNG state (ranks.pt). With ddp the
        parameters and optimizer are equal on all ranks; with fsdp rank 0 writes the gathered
        full weights and each rank its optimizer shard (through a staging folder, so that the
        checkpoint appears whole or not at all)."""
        if not self.enabled:
            save_fn(run_dir, iteration, policy, optimizer, scheduler, heads, state)
            return
        import torch
        import torch.distributed as dist

        states: list = [None] * self.world_size
        dist.all_gather_object(states, self._rng_state(policy))
        model_state = shards = staging = None
        if self.sharded:
            model_state = fsdp.full_state_dict(policy.model)
            staging = Path(run_dir) / "checkpoints" / f".shards_iter_{iteration:06d}"
            staging.mkdir(parents=True, exist_ok=True)
            fsdp.save_optimizer_shard(optimizer, staging / f"optimizer_rank{self.rank}.pt")
            self.barrier()
            shards = sorted(staging.glob("optimizer_rank*.pt"))
        if self.is_main:
            path = save_fn(run_dir, iteration, policy, optimizer, scheduler, heads, state, model_state=model_state,
                           optimizer_shards=shards)
            torch.save({"world_size": self.world_size, "ranks": states, "sharded": self.sharded},
                       Path(path) / "ranks.pt")
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        self.barrier()

    def save_policy(self, policy, out_dir) -> None:
        """Rank 0 saves the policy as an HF folder (FSDP: the weights gathered from every rank)."""
        if self.sharded:
            state = fsdp.full_state_dict(policy.model)
            if self.is_main:
                policy.save(out_dir, state_dict=state)
            self.barrier()
        elif self.is_main:
            policy.save(out_dir)

    def check_checkpoint(self, checkpoint) -> None:
        """Before any work: a checkpoint whose optimizer is sharded resumes only as it was saved."""
        if checkpoint is None:
            return
        import torch

        path = Path(checkpoint) / "ranks.pt"
        from agentgym.trainers.checkpoint import safe_load  # lazy: needs torch

        saved = safe_load(path, "per-rank state") if path.is_file() else {"world_size": 1, "sharded": False}
        was = saved.get("sharded", False)
        if was != self.sharded or (was and saved["world_size"] != self.world_size):
            then = f"data_parallel=fsdp on {saved['world_size']} ranks" if was else "a full optimizer state"
            now = (f"data_parallel=fsdp on {self.world_size} ranks" if self.sharded
                   else "data_parallel=ddp" if self.enabled else "one process")
            raise ConfigError(f"{checkpoint} was saved with {then} and cannot resume with {now}: resume with "
                              + (f"data_parallel=fsdp --nproc {saved['world_size']}" if was else "data_parallel=ddp"))

    def restore_rank_state(self, checkpoint, policy, log: Callable[[str], None], optimizer=None) -> None:
        if not self.enabled:
            return
        import torch

        from agentgym.trainers.checkpoint import load_policy_sampling_state, set_rng_state  # lazy: needs torch

        if self.sharded:
            fsdp.load_optimizer_shard(optimizer, Path(checkpoint) / f"optimizer_rank{self.rank}.pt")
        path = Path(checkpoint) / "ranks.pt"
        if not path.is_file():
            log(f"{checkpoint} has no per-rank RNG states (saved by one process): ranks continue from rank 0's")
            return
        from agentgym.trainers.checkpoint import safe_load  # lazy: needs torch

        blob = safe_load(path, "per-rank state")
        if blob["world_size"] != self.world_size:
            log(f"checkpoint saved with {blob['world_size']} ranks, resumed with {self.world_size}: the run continues, "
                "but not bit for bit")
            return
        mine = blob["ranks"][self.rank]
        set_rng_state(mine["rng"])
        load_policy_sampling_state(policy, mine)


def setup(cfg, log: Callable[[str], None] = print) -> DataParallel:
    """Start of `train`: check the world size and join the process group (torchrun).
    Everything here fails before any work starts."""
    rank, world, local_rank = world_from_env()
    check_world(cfg, world)
    dp = DataParallel(rank, world, local_rank, sharded=cfg.data_parallel == "fsdp")
    if dp.enabled:
        import torch
        import torch.distributed as dist

        cuda = str(cfg.policy.device).startswith("cuda") and torch.cuda.is_available()
        if cuda:
            cfg.policy.device = f"cuda:{local_rank}"
            torch.cuda.set_device(local_rank)
        if not dist.is_initialized():
            from datetime import timedelta

            # rank 0 alone builds the tiny model and runs SFT while the others wait: a long first barrier
            dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=timedelta(hours=2))
        if rank == 0:
            per = cfg.rollout.tasks_per_iter // world
            log(f"data parallel: {world} ranks ({dist.get_backend()}, {cfg.data_parallel}), {per} groups of "
                f"{cfg.rollout.group_size} episodes per rank per iteration")
    return dp


def ray_env_pool(executor: str, engine: str, ray_cfg, dp: DataParallel, log: Callable[[str], None] = print):
    """The run's env-worker pool (passed to collect as the executor) when `executor` (env.executor)
    declares one (Ray's RayEnvPool), after checking the Ray cluster (the `ray:` section) can hold the
    env workers and policy replicas that the executor and the engine (policy.engine) declare they
    place there; None otherwise."""
    env_on_ray = executor_needs_ray_cluster(executor)
    engine_on_ray = engine_needs_ray_cluster(engine)
    if not (env_on_ray or engine_on_ray):
        return None
    import dataclasses

    rc = ray_cfg if env_on_ray else dataclasses.replace(ray_cfg, num_workers=0)
    info = executors_ray.check_resources(rc, with_policy=engine_on_ray)
    if dp.is_main:
        log(f"ray: {info['cpus']:g} CPUs in the cluster, {info['cpus_requested']:g} requested")
    return make_run_pool(executor, ray_cfg)


def teardown(dp: DataParallel, env_pool=None, finished: bool = True) -> None:
    """Shut the env pool and the process group. `finished=False` (a rank failed) skips the final
    barrier: the other ranks may never reach it."""
    if env_pool is not None:
        env_pool.shutdown()
    if dp.enabled:
        import torch.distributed as dist

        if dist.is_initialized():
            # Every rank reaches the end before any tears down: a gloo rank that destroys its group
            # while a peer is still talking to it (rank 0 saving, say) can abort at exit with
            # "terminate called without an active exception".
            try:
                if finished:
                    dist.barrier()
            finally:
                dist.destroy_process_group()


def exit_rank(code: int) -> None:
    """End a torchrun rank's process once its work is done and its group torn down (`teardown`).

    A rank leaves through `os._exit`, after flushing its output: no interpreter finalization and no
    C++ static destructors. CI saw a finished fsdp rank (gloo, CPU) abort there with "terminate
    called without an active exception" (SIGABRT, 2 of 4 fsdp runs in one CI run; none in 25 repeats
    of its worker here); torchrun then failed the whole run although every result was written. A single process
    (no WORLD_SIZE) exits normally."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say
            pass
    os._exit(code)


def main_log(dp: DataParallel, log: Callable[[str], None]) -> Callable[[str], None]:
    """Only rank 0 talks."""
    return log if dp.is_main else (lambda *_a, **_k: None)


class NullLogger:
    def log(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


# --- launching -----------------------------------------------------------------------------------
def launch(nproc: int, cli_args: list[str]) -> int:
    """`agentgym train ... --nproc N`: re-run this command under torchrun on this machine."""
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "agentgym.trainers.cli", "train", *cli_args]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.call(cmd, env=env)


def torchrun_available() -> bool:
    return shutil.which("torchrun") is not None
