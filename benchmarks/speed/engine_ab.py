"""The engine's and the update's savings, each switched on and off in one process (CPU seconds).

Each comparison alternates the two versions `--rounds` times on the same inputs, so a shared
machine's load falls on both alike, and reports this process's CPU time (`time.process_time`):

    windowed_prefix   the main job's rollout (8 tasks x 6 episodes, household-tiny's windowed
                      prompts, 12 turns) with the KV cache of the prefix each prompt shares with
                      its episode's previous turn reused, against every prompt prefilled whole
    reserved_cache    a growing conversation's rollout (history "full", 4 tasks x 4 episodes,
                      12 turns) with decode steps written into a cache with room reserved, against
                      Hugging Face's concatenating cache
    duplicate_samples the main job's update (one iteration's samples, minibatch 128, micro 32) with
                      identical samples computed once, against every sample computed
    shared_prefix     the same update with a 200-token system prompt before every sample: level-wise
                      passes over shared prefixes, against the plain pass
    micro_batch_tokens the same update in passes of about 1,024 tokens against 32 samples each
    last_layer        the same update (household-tiny's micro-batches) with the last decoder layer
                      run at the loss positions alone (trainers/last_layer.py), against the full forward
    compiled_update   not a switch of ours: the main job's update with torch.compile(dynamic=True) on
                      the model's forward (after a warm-up update that compiles), against eager

Inputs: the main job's warm start and its logged iterations (runs/household-tiny, from
`agentgym train household-tiny`), and for reserved_cache the TRL benchmark's full-history warm start
(runs/trl_vs_agentgym/warm, from benchmarks/speed/trl_vs_agentgym.py). Written to docs/engine_ab.json.

Usage: python benchmarks/speed/engine_ab.py [--rounds 3] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
MAIN_RUN = ROOT / "runs" / "household-tiny"
FULL_WARM = ROOT / "runs" / "trl_vs_agentgym" / "warm"


def alternate(rounds: int, arms: dict) -> dict:
    """arms: name -> callable(round) returning a dict of facts; CPU seconds per call, alternated,
    after one untimed call of each (the first call in a process pays for allocations and caches)."""
    for run in arms.values():
        run(rounds)
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    turns: dict[str, list[int]] = {name: [] for name in arms}
    facts: dict[str, dict] = {}
    for r in range(rounds):
        for name, run in arms.items():
            start = time.process_time()
            facts[name] = run(r)
            seconds[name].append(time.process_time() - start)
            turns[name].append(facts[name].get("turns", 1))
            print(f"  round {r + 1} {name}: {seconds[name][-1]:.2f} CPU s {facts[name]}", flush=True)
    means = {name: statistics.mean(v) for name, v in seconds.items()}
    # rollouts: the two versions' float rounding differs, so their sampled episodes drift apart;
    # compare CPU per turn played
    per_unit = {name: sum(seconds[name]) / sum(turns[name]) for name in arms}
    on, off = list(arms)
    return {"cpu_s": means, "per_round": seconds, "turns": turns, "facts": facts,
            "ratio": per_unit[on] / per_unit[off]}


def main_job_samples(iteration: str):
    from agentgym.trainers.samples import make_samples, tokenize_trajectories
    from agentgym.trajectory import Trajectory

    path = MAIN_RUN / "trajectories" / f"train_iter{iteration}.jsonl"
    trajectories = [Trajectory.from_dict(json.loads(line)) for line in path.open()]
    rng = np.random.default_rng(0)
    return make_samples(tokenize_trajectories(trajectories, "per-step"),
                        [rng.normal(size=len(t.steps)) for t in trajectories])


def update_cpu(samples, **ppo) -> dict:
    from agentgym.policies.hf import HFPolicy
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    policy = HFPolicy(MAIN_RUN / "sft_model")
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    stats = learner.ppo_update(PPOConfig(epochs=1, minibatch_size=128, micro_batch_size=32, **ppo), (0.8, 1.2),
                               policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
    return {"pg_loss": round(stats["pg_loss"], 7), "token_ratio": stats.get("shared_prefix_token_ratio")}


def windowed_prefix(rounds: int) -> dict:
    import agentgym
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.trainers.config import load_config

    cfg = load_config("household-tiny", [])
    space = agentgym.get_task_space(cfg.env.id)
    tasks = [t for t in space.split("train") if space.category(t) in cfg.env.categories][:8]
    policy = HFPolicy(MAIN_RUN / "sft_model")

    def run(reuse: bool):
        def go(r: int) -> dict:
            policy.reuse_kv = reuse
            trajectories = agentgym.collect(cfg.env.id, tasks, policy, 6, seed=r, chat=cfg.env.chat,
                                            max_turns=12, env_kwargs=cfg.env.env_kwargs,
                                            sampling=SamplingParams(temperature=1.0, max_new_tokens=12, seed=r))
            return {"turns": sum(len(t.steps) for t in trajectories)}
        return go

    return alternate(rounds, {"reuse": run(True), "prefill_whole": run(False)})


def reserved_cache(rounds: int) -> dict:
    from transformers.cache_utils import DynamicCache

    import agentgym
    import agentgym.policies.hf as hf
    from agentgym.policies.base import SamplingParams

    sys.path.insert(0, str(ROOT))
    from benchmarks.speed.trl_vs_agentgym import CATEGORIES, CHAT

    space = agentgym.get_task_space("agentgym/Household-v0")
    tasks = [t for t in space.split("train") if space.category(t) in CATEGORIES][120:124]
    policy = hf.HFPolicy(FULL_WARM)
    reserved = hf._reserved_cache

    def concatenating(reserve, layers=None):
        return DynamicCache(ddp_cache_data=layers) if layers else DynamicCache()

    def run(make_cache):
        def go(r: int) -> dict:
            hf._reserved_cache = make_cache
            trajectories = agentgym.collect("agentgym/Household-v0", tasks, policy, 4, seed=r, chat=CHAT, max_turns=12,
                                            sampling=SamplingParams(temperature=1.0, max_new_tokens=12, seed=r))
            return {"turns": sum(len(t.steps) for t in trajectories)}
        return go

    try:
        return alternate(rounds, {"reserved": run(reserved), "concatenating": run(concatenating)})
    finally:
        hf._reserved_cache = reserved


def duplicate_samples(rounds: int) -> dict:
    from agentgym.trainers import learner
    from agentgym.trainers.ppo import token_logprobs

    samples = main_job_samples("00055")
    unique = learner._unique_forward

    def every_sample(model, batch, micro, where, want_hidden, want_entropy):
        return token_logprobs(model, batch["input_ids"], batch["attention_mask"], want_hidden,
                              want_entropy=want_entropy, positions=where)[:3 if want_entropy else 2]

    def run(forward):
        def go(r: int) -> dict:
            learner._unique_forward = forward
            return update_cpu(samples, share_prefixes=False)
        return go

    distinct = len({tuple(s.input_ids) for s in samples})
    try:
        out = alternate(rounds, {"once": run(unique), "every": run(every_sample)})
    finally:
        learner._unique_forward = unique
    out["samples"], out["distinct_samples"] = len(samples), distinct
    return out


def shared_prefix(rounds: int) -> dict:
    import dataclasses

    samples = main_job_samples("00030")
    system = [int(x) for x in np.random.default_rng(5).integers(10, 300, size=200)]
    n = len(system)
    samples = [dataclasses.replace(s, input_ids=system + s.input_ids, loss_mask=[0] * n + s.loss_mask,
                                   old_logprobs=[0.0] * n + s.old_logprobs, advantages=[0.0] * n + s.advantages,
                                   value_positions=[v + n for v in s.value_positions],
                                   response_ends=[v + n for v in s.response_ends]) for s in samples]
    return alternate(rounds, {"shared": lambda r: update_cpu(samples, share_prefixes=True),
                              "plain": lambda r: update_cpu(samples, share_prefixes=False)})


def micro_batch_tokens(rounds: int) -> dict:
    """The main job's update with micro-batches of about 1,024 tokens (household-tiny's setting)
    against 32 samples each (its earlier one): the same gradient, other pass sizes."""
    samples = main_job_samples("00055")
    return alternate(rounds, {
        "tokens_1024": lambda r: update_cpu(samples, share_prefixes=False, micro_batch_tokens=1024),
        "samples_32": lambda r: update_cpu(samples, share_prefixes=False)})


def last_layer(rounds: int) -> dict:
    """The main job's update with the last layer's queries, attention output, MLP and norm at the
    loss positions only, against every position (the same values and gradients up to rounding)."""
    from agentgym.trainers import ppo

    samples = main_job_samples("00055")
    partial = ppo.final_hidden_at

    def run(final_hidden_at):
        def go(r: int) -> dict:
            ppo.final_hidden_at = final_hidden_at
            return update_cpu(samples, share_prefixes=False, micro_batch_tokens=1024)
        return go

    try:
        return alternate(rounds, {"loss_positions": run(partial), "every_position": run(lambda *a, **k: None)})
    finally:
        ppo.final_hidden_at = partial


def compiled_update(rounds: int) -> dict:
    """Not a switch of ours: torch.compile(dynamic=True) on the model's forward for the main job's
    update (household-tiny's micro-batches), after one update of warm-up that compiles."""
    from agentgym.policies.hf import HFPolicy
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    samples = main_job_samples("00055")
    policies = {}
    for name in ("compiled", "eager"):
        policy = HFPolicy(MAIN_RUN / "sft_model")
        if name == "compiled":
            policy.model.forward = torch.compile(policy.model.forward, dynamic=True)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)  # the same update every round
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        policies[name] = (policy, optimizer, scheduler)
    pc = PPOConfig(epochs=1, minibatch_size=128, micro_batch_size=32, micro_batch_tokens=1024)

    def run(name: str):
        def go(r: int) -> dict:
            policy, optimizer, scheduler = policies[name]
            stats = learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
            return {"pg_loss": round(stats["pg_loss"], 7)}
        return go

    start = time.process_time()
    run("compiled")(0)
    warm_up = time.process_time() - start
    out = alternate(rounds, {"compiled": run("compiled"), "eager": run("eager")})
    out["compile_warm_up_cpu_s"] = warm_up
    return out


COMPARISONS = {"windowed_prefix": windowed_prefix, "reserved_cache": reserved_cache,
               "duplicate_samples": duplicate_samples, "shared_prefix": shared_prefix,
               "micro_batch_tokens": micro_batch_tokens, "last_layer": last_layer, "compiled_update": compiled_update}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=list(COMPARISONS))
    ap.add_argument("--out", default=str(ROOT / "docs" / "engine_ab.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    out_path = Path(args.out)
    report = json.loads(out_path.read_text()) if out_path.is_file() else {}
    for name in args.only or list(COMPARISONS):
        print(f"{name}:", flush=True)
        report[name] = COMPARISONS[name](args.rounds)
        print(f"{name}: ratio {report[name]['ratio']:.3f} {report[name]['cpu_s']}", flush=True)
        report["command"] = "python " + " ".join(sys.argv)
        out_path.write_text(json.dumps(report, indent=2))
    print(f"written: {out_path}")


if __name__ == "__main__":
    main()
