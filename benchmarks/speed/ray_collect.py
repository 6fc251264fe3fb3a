"""Scaling figures: Ray env workers against the process and in-process executors, Ray's
overhead per env step, an env worker's restart time after a kill, and data-parallel update time.

Prints, measured in this run (wall clock; the README says which machine):
  * env steps/s of `agentgym.collect` on household (random admissible actions, so the policy
    costs ~nothing and the executor is what is measured) for: in-process as `collect` runs it
    (fresh envs per call), in-process with envs kept across calls (as the Ray pool keeps them),
    the process executor with 2 workers (it starts its processes inside every collect, so that
    is in its figure), Ray with 1 and 2 env workers (a persistent pool, started before timing;
    the start-up is printed on its own line); each as a ratio to in-process;
  * Ray's overhead per env step: (Ray 1 worker - in-process with kept envs) / steps, in
    microseconds, and per batched call (one call per worker per turn);
  * env-worker restart time: SIGKILL a worker's process, time until the same actor handle
    answers from a new process (Ray restarts it; max_restarts=-1);
  * data parallel: seconds per PPO update (ppo_update on a household-tiny-sized model and a fixed
    batch of household-tiny's size, 8 groups x 6 episodes, or --ddp-groups N) in 1 process with 1
    and 2 threads and in 2 gloo processes (torchrun) with 1 thread each; and a gloo all-reduce's
    bandwidth between the 2 processes.

Usage: python benchmarks/speed/ray_collect.py [--quick] [--skip-ddp | --ddp-only] [--ddp-groups N]
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV_ID = "agentgym/Household-v0"


def _collect_rate(executor, tasks, group, reps, **kw) -> tuple[float, int, int]:
    import agentgym
    from agentgym.policies import RandomPolicy

    best, steps, calls = 0.0, 0, 0
    for r in range(reps):
        turns = []
        t0 = time.perf_counter()
        trajs = agentgym.collect(ENV_ID, tasks, RandomPolicy(seed=r), group_size=group, seed=r, executor=executor,
                                 on_turn=lambda done, n: turns.append(1), **kw)
        wall = time.perf_counter() - t0
        steps = sum(len(t.steps) for t in trajs)
        assert not any(t.infra_error for t in trajs)
        calls = len(turns)
        best = max(best, steps / wall)
    return best, steps, calls


class KeptInProcess:
    """In-process executor whose envs outlive the collect call (the fair baseline for a pool)."""

    def __init__(self):
        self.ex = None

    def executor_for(self, factory, num_envs):
        from agentgym.executors import InProcessExecutor

        if self.ex is None or len(self.ex.envs) < num_envs:
            self.ex = InProcessExecutor(factory, num_envs)
            self.ex.close = lambda: None
        return self.ex


def bench_collect(quick: bool) -> dict:
    import ray

    from agentgym.executors_ray import RayConfig, RayEnvPool
    from agentgym.registration import get_task_space

    tasks = get_task_space(ENV_ID).split("train")[: 16 if quick else 32]
    group, reps = 8, (2 if quick else 3)
    env_kwargs = {"max_episode_steps": 30}
    out: dict = {"episodes": len(tasks) * group}
    out["inprocess"], out["steps"], out["turns"] = _collect_rate("inprocess", tasks, group, reps, env_kwargs=env_kwargs)
    kept = KeptInProcess()
    _collect_rate(kept, tasks, group, 1, env_kwargs=env_kwargs)  # build the envs
    out["kept"], _, _ = _collect_rate(kept, tasks, group, reps, env_kwargs=env_kwargs)
    out["process2"], _, _ = _collect_rate("process", tasks, group, reps, num_workers=2, env_kwargs=env_kwargs)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    for n in (1, 2):
        pool = RayEnvPool(RayConfig(num_workers=n, num_cpus_per_worker=1))
        t0 = time.perf_counter()
        _collect_rate(pool, tasks[:1], 1, 1, env_kwargs=env_kwargs)  # start the workers
        out[f"ray_start{n}"] = time.perf_counter() - t0
        out[f"ray{n}"], _, _ = _collect_rate(pool, tasks, group, reps, env_kwargs=env_kwargs)
        if n == 1:
            out["restart_s"] = bench_restart(ray, pool, 3 if quick else 5)
        pool.shutdown()
    ray.shutdown()
    return out


def bench_restart(ray, pool, reps: int) -> list[float]:
    ex = pool._executor
    times = []
    for _ in range(reps):
        pid = ray.get(ex.workers[0].ready.remote())
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        while True:
            try:
                new = ray.get(ex.workers[0].ready.remote(), timeout=60)
                if new != pid:
                    break
            except ray.exceptions.RayError:
                time.sleep(0.01)
        times.append(time.perf_counter() - t0)
    return times


# --- data parallel --------------------------------------------------------------------------------
DDP_OVERRIDES = ["estimator.name=grpo", "rollout.group_size=6", "ppo.minibatch_size=128", "ppo.micro_batch_size=32",
                 "ppo.epochs=1", "ppo.lr=1e-4"]


def make_ddp_batch(work: Path, groups: int) -> tuple[Path, Path]:
    """A household-tiny-sized model (hidden 256, 2 layers, vocab 1000) and one batch of `groups`
    groups x 6 episodes sampled from it (<= 12 steps each), with made-up non-zero advantages."""
    import numpy as np
    import torch

    import agentgym
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts
    from agentgym.registration import get_task_space

    torch.set_num_threads(1)
    chat = {"parser": "raw", "history": 0, "system_prompt": ""}
    model = build_tiny_model(work / "model", env_id=ENV_ID, texts=collect_env_texts(ENV_ID, num_tasks=16, chat=chat),
                             vocab_size=1000, hidden=256, layers=2, heads=8)
    tasks = get_task_space(ENV_ID).split("train")[:groups]
    trajs = agentgym.collect(ENV_ID, tasks, HFPolicy(model), 6, seed=0, chat=chat, env_kwargs={"max_episode_steps": 12},
                             sampling=SamplingParams(temperature=1.0, max_new_tokens=12, seed=0))
    rng = np.random.default_rng(0)
    advs = [rng.normal(size=len(t.steps)).astype(np.float32) for t in trajs]
    batch = work / "batch.pkl"
    batch.write_bytes(pickle.dumps((trajs, advs)))
    return Path(model), batch


def ddp_worker(model: str, batch: str, out: str, threads: int, reps: int, groups: int, data_parallel: str) -> None:
    """One rank (or the only process): time ppo_update on its share of the batch."""
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    from agentgym.policies.hf import HFPolicy
    from agentgym.trainers import distributed
    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import ppo_update, update_clip
    from agentgym.trainers.run_setup import make_optimizer
    from agentgym.trainers.samples import build_samples

    trajs, advs = pickle.loads(Path(batch).read_bytes())
    cfg = load_config({}, [f"policy.model={model}", f"rollout.tasks_per_iter={groups}", f"data_parallel={data_parallel}",
                           *DDP_OVERRIDES])
    dp = distributed.setup(cfg)
    mine, first = dp.shard(list(range(groups)))
    trajs, advs = trajs[first * 6:(first + len(mine)) * 6], advs[first * 6:(first + len(mine)) * 6]
    policy = HFPolicy(model)
    dp.shard_model(policy)  # data_parallel=fsdp only
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, {})
    times = []
    for r in range(reps + 1):
        samples = dp.global_samples(build_samples(trajs, advs))
        dp.barrier()
        t0 = time.perf_counter()
        ppo_update(cfg.ppo, update_clip(cfg.ppo, cfg.estimator.name), policy, optimizer, scheduler, samples,
                   np.random.default_rng(r), r, dp=dp)
        dp.barrier()
        times.append(time.perf_counter() - t0)
    tokens = sum(len(s) for s in samples)
    def mine(t):  # this rank's part of a (possibly sharded) tensor
        return t.to_local() if hasattr(t, "to_local") else t

    params = list(policy.model.parameters())
    held = ([mine(p) for p in params] + [mine(p.grad) for p in params if p.grad is not None]
            + [mine(v) for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0])
    held_mb = sum(t.numel() * t.element_size() for t in held) / 2**20
    # gloo all-reduce bandwidth on a 64 MB buffer (what a gradient sync of a 16M-parameter model moves)
    bw = None
    if dp.enabled:
        import torch.distributed as dist

        buf = torch.ones(16 * 1024 * 1024)
        dist.all_reduce(buf)
        t0 = time.perf_counter()
        for _ in range(3):
            dist.all_reduce(buf)
        bw = 3 * buf.numel() * 4 / (time.perf_counter() - t0) / 1e9
    if dp.is_main:
        Path(out).write_text(repr({"times": times[1:], "samples": len(samples), "tokens": tokens, "allreduce_GBps": bw,
                                   "params": sum(p.numel() for p in policy.model.parameters()), "held_mb": held_mb}))
    distributed.teardown(dp)


def bench_ddp(quick: bool, groups: int) -> dict:
    reps = 1 if quick else 3
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model, batch = make_ddp_batch(work, groups)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        results = {}
        for name, nproc, threads, data_parallel in (
                ("1 process x 1 thread", 1, 1, "ddp"), ("1 process x 2 threads", 1, 2, "ddp"),
                ("2 processes x 1 thread (gloo, ddp)", 2, 1, "ddp"), ("2 processes x 1 thread (gloo, fsdp)", 2, 1, "fsdp")):
            out = work / f"{nproc}_{threads}_{data_parallel}.txt"
            args = [__file__, "--ddp-worker", str(model), str(batch), str(out), str(threads), str(reps), str(groups),
                    data_parallel]
            cmd = [sys.executable] + (["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
                                      if nproc > 1 else []) + args
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            results[name] = eval(out.read_text())
        return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-ddp", action="store_true")
    ap.add_argument("--ddp-only", action="store_true")
    ap.add_argument("--ddp-groups", type=int, default=8, help="groups of 6 episodes in the update batch (even)")
    ap.add_argument("--ddp-worker", nargs=7, metavar=("MODEL", "BATCH", "OUT", "THREADS", "REPS", "GROUPS", "DP"))
    args = ap.parse_args()
    if args.ddp_worker:
        m, b, o, t, r, g, d = args.ddp_worker
        ddp_worker(m, b, o, int(t), int(r), int(g), d)
        return
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at start (wall-clock figures; other processes "
          "on the machine slow them)")
    if args.ddp_only:
        return print_ddp(bench_ddp(args.quick, args.ddp_groups))
    c = bench_collect(args.quick)
    print(f"\ncollect on household: {c['episodes']} episodes (random admissible actions, <= 30 steps), "
          f"{c['steps']} env steps in {c['turns']} batched turns; best of runs")
    print("| executor | env steps/s | vs in-process |\n|---|---:|---:|")
    for key, name in (("inprocess", "in-process (fresh envs per collect)"), ("kept", "in-process, envs kept"),
                      ("process2", "process executor, 2 workers"),
                      ("ray1", "Ray, 1 env worker"), ("ray2", "Ray, 2 env workers")):
        print(f"| {name} | {c[key]:,.0f} | {c[key] / c['inprocess']:.2f}x |")
    per_step = (1 / c["ray1"] - 1 / c["kept"]) * 1e6
    per_call = (c["steps"] / c["ray1"] - c["steps"] / c["kept"]) / c["turns"] * 1e3
    print(f"Ray overhead: {per_step:.1f} us per env step ({per_call:.2f} ms per batched call to one worker)")
    print(f"Ray env workers start: {c['ray_start1']:.2f}s (1 worker), {c['ray_start2']:.2f}s (2 workers), "
          "once per run")
    r = c["restart_s"]
    print(f"env worker restart after SIGKILL: median {statistics.median(r):.2f}s (min {min(r):.2f}, max {max(r):.2f}, "
          f"{len(r)} kills)")
    if args.skip_ddp:
        return
    print_ddp(bench_ddp(args.quick, args.ddp_groups))


def print_ddp(d: dict) -> None:
    first = next(iter(d.values()))
    print(f"\ndata-parallel PPO update: {first['params'] / 1e6:.2f}M-parameter model, {first['samples']} samples, "
          f"{first['tokens']:,} tokens per update; median of runs")
    print("| setting | s per update | speed-up | weights + grads + AdamW state held by rank 0 |\n|---|---:|---:|---:|")
    base = statistics.median(first["times"])
    for name, res in d.items():
        t = statistics.median(res["times"])
        print(f"| {name} | {t:.2f} | {base / t:.2f}x | {res['held_mb']:.1f} MB |")
    bw = d["2 processes x 1 thread (gloo, ddp)"]["allreduce_GBps"]
    print(f"gloo all-reduce of 64 MB between 2 local processes: {bw:.2f} GB/s")


if __name__ == "__main__":
    main()
