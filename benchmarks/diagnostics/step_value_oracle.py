"""How close each estimator's per-step advantage comes to the policy's true one, on household-tiny.

The policy is the household-tiny preset's warm start (its tiny model after the preset's SFT). One
tree rollout of the preset's training tasks (seed fixed) gives the fixed root episodes and, at
every step of every root, K + N branches restored from the env's snapshot there:

* the first K branches of each point (K = the tree estimator's default `k`) are what
  `estimator.name=tree` trains on: at every step (its default `every`, "tree"), and at every
  third step (docs/tree_protocol.md's arm, "tree_every3");
* the other N are the oracle: Monte Carlo continuations of the policy from that state, never
  seen by any estimator.

With r_t the step reward less the preset's invalid penalty and G the discounted return (the
estimators' own, gamma from the preset), the oracle's step values on a root episode are

    V(s_t)      = mean of G over the N oracle continuations from s_t
    Q(s_t, a_t) = r_t + gamma * V(s_t+1)      (0 for V past the episode's last step)
    A(s_t, a_t) = Q(s_t, a_t) - V(s_t)

Q needs no continuations of its own: household's transitions are deterministic, so the N
continuations from s_t+1 are N continuations of (s_t, a_t). Each estimator's advantages are
computed as the trainer computes them (`compute_advantages` with the preset's estimator settings):
GiGPO and GRPO from the root episodes alone (a plain rollout), tree from the roots and their K
branches (so tree spends more env steps: `env_steps` in the results). Reported per estimator over the root episodes' steps: Pearson and Spearman correlation
with the oracle's A, with 95% percentile bootstrap intervals over root episodes, and the
difference of each from tree's. The oracle is noisy too: its split-half reliability (two halves
of the N continuations, Spearman-Brown to N) bounds what any estimator can reach, sqrt(reliability).

    python benchmarks/diagnostics/step_value_oracle.py                         # -> docs/step_value_oracle.json
    python benchmarks/diagnostics/step_value_oracle.py --tasks 1 --continuations 4 --out /tmp/pilot.json   # a pilot

The warm start is built in --work/warm (about 20 CPU minutes) or reused from there when its
settings match the preset's (a hash in its folder). One process, one torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
sys.path.insert(0, str(ROOT))
from benchmarks.harness.provenance import code_version, command, load_average, process_cpu_seconds  # noqa: E402

SEED = 0  # the warm start's seed, the task draw's and the rollout's sampling


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1, ties sharing their mean rank (GRPO gives every step of an episode one value)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denom) if denom > 0 else float("nan")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def oracle_values(roots, oracle_branches, est_cfg, gamma: float):
    """Per root episode, per step: V(s_t) and Q(s_t, a_t) from the oracle continuations, both from
    all N continuations and from each half of them (for the split-half reliability)."""
    from agentgym.trainers.estimators.common import FlatBatch, discounted_returns

    batch = FlatBatch.build(oracle_branches, est_cfg)
    returns = discounted_returns(batch, batch.reward, gamma)
    first = {}  # (parent id, step) -> the returns G of its continuations, in branch order
    for i, traj in enumerate(oracle_branches):
        tree = traj.metadata["tree"]
        if traj.infra_error or not traj.steps:
            continue
        first.setdefault((tree["parent"], tree["step"]), []).append(returns[batch.offsets[i]])
    root_batch = FlatBatch.build(roots, est_cfg)
    out = []
    for i, root in enumerate(roots):
        rid, n = root.metadata["tree"]["id"], len(root.steps)
        rewards = root_batch.reward[root_batch.offsets[i]:root_batch.offsets[i] + n]
        parts = {}
        for part, pick in (("all", slice(None)), ("half_a", slice(0, None, 2)), ("half_b", slice(1, None, 2))):
            v = np.array([np.mean(first[(rid, t)][pick]) for t in range(n)] + [0.0])  # past the end: 0
            q = rewards + gamma * v[1:]
            parts[part] = {"v": v[:n], "q": q, "a": q - v[:n]}
        out.append(parts)
    return out


def bootstrap(per_episode: list[dict[str, np.ndarray]], names: list[str], truth: str, reps: int, rng) -> dict:
    """Correlations of each name's advantages with `truth`'s over all steps, and percentile 95%
    intervals from resampling episodes; plus each name's difference from tree's."""
    def corrs(eps):
        y = np.concatenate([e[truth] for e in eps])
        return {n: (pearson(np.concatenate([e[n] for e in eps]), y), spearman(np.concatenate([e[n] for e in eps]), y))
                for n in names}

    point = corrs(per_episode)
    draws = []
    for _ in range(reps):
        pick = rng.integers(len(per_episode), size=len(per_episode))
        draws.append(corrs([per_episode[j] for j in pick]))

    def interval(values):
        values = np.array([v for v in values if np.isfinite(v)])
        return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]

    out = {}
    for n in names:
        out[n] = {"pearson": point[n][0], "pearson_ci": interval([d[n][0] for d in draws]),
                  "spearman": point[n][1], "spearman_ci": interval([d[n][1] for d in draws])}
        if n != "tree" and "tree" in names:
            out[n]["tree_minus_this_pearson"] = point["tree"][0] - point[n][0]
            out[n]["tree_minus_this_pearson_ci"] = interval([d["tree"][0] - d[n][0] for d in draws])
            out[n]["tree_minus_this_spearman"] = point["tree"][1] - point[n][1]
            out[n]["tree_minus_this_spearman_ci"] = interval([d["tree"][1] - d[n][1] for d in draws])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8, help="training tasks (the preset's tasks per iteration)")
    ap.add_argument("--continuations", type=int, default=16, help="N: the oracle's continuations per state")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--work", default="runs/step_value_oracle", help="the warm start is built or reused here")
    ap.add_argument("--out", default=str(ROOT / "docs" / "step_value_oracle.json"))
    args = ap.parse_args()
    if args.continuations < 2 or args.tasks < 1:
        raise SystemExit("--continuations must be >= 2 (the split halves) and --tasks >= 1")

    import torch

    torch.set_num_threads(1)
    import agentgym
    from agentgym.policies.base import SamplingParams
    from agentgym.rollout import BranchConfig
    from agentgym.trainers.config import load_config
    from agentgym.trainers.estimators import compute_advantages
    from agentgym.trainers.estimators.tree import OPTIONS as TREE_DEFAULTS
    from agentgym.trainers.run_setup import make_policy, prepare_start_model
    from agentgym.trainers.task_selection import select_train_tasks

    version, load0 = code_version(), load_average()  # before the run: the code it ran
    wall0, cpu0 = time.perf_counter(), time.process_time()
    work = Path(args.work)
    (work / "warm").mkdir(parents=True, exist_ok=True)
    cfg = load_config("household-tiny", [f"seed={SEED}", "torch_threads=1", f"run_dir={work}/warm", "iterations=0"])
    start_model, _ = prepare_start_model(cfg, work / "warm", print, session=None)
    warm_hash = json.loads((Path(start_model) / "agentgym_settings.json").read_text())["hash"]
    policy = make_policy(cfg.policy, start_model)
    warm_cpu = time.process_time() - cpu0

    k, every = int(TREE_DEFAULTS["k"]), int(TREE_DEFAULTS["every"])
    space = agentgym.get_task_space(cfg.env.id)
    tasks = select_train_tasks(cfg.env, space, SEED)[: args.tasks]
    r = cfg.rollout
    sampling = SamplingParams(temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens, seed=SEED,
                              admissible_only=r.admissible_only)
    # every step of every root branches K + N times (the oracle needs every state; the tree
    # estimator's K branches are taken at its own `every` from the same points)
    t0, c0 = time.perf_counter(), time.process_time()
    trajs = agentgym.collect(cfg.env.id, tasks, policy, r.group_size, seed=SEED, sampling=sampling, chat=cfg.env.chat,
                             env_kwargs=cfg.env.env_kwargs, max_turns=cfg.env.max_turns, session=None,
                             branch=BranchConfig(k=k + args.continuations, every=1))
    rollout_wall, rollout_cpu = time.perf_counter() - t0, time.process_time() - c0

    roots = [t for t in trajs if t.metadata["tree"]["parent"] is None]
    by_point: dict[tuple, list] = {}
    for t in trajs:
        tree = t.metadata["tree"]
        if tree["parent"] is not None:
            by_point.setdefault((tree["parent"], tree["step"]), []).append(t)
    # the tree estimator's branches at its default `every` and at the protocol's every=3
    tree_branches: dict[int, list] = {every: [], 3: []}
    oracle = []
    for (_, step), branches in by_point.items():
        branches.sort(key=lambda t: int(t.metadata["tree"]["id"].rsplit("#", 1)[1]))  # in the order they were made
        for n, kept in tree_branches.items():
            kept += branches[:k] if step % n == 0 else []
        oracle += branches[k:]

    est = cfg.estimator
    adv = {"gigpo": compute_advantages(roots, replace(est, name="gigpo")),
           "grpo": compute_advantages(roots, replace(est, name="grpo")),
           "tree": compute_advantages(roots + tree_branches[every], replace(est, name="tree"))[: len(roots)],
           "tree_every3": compute_advantages(roots + tree_branches[3], replace(est, name="tree"))[: len(roots)]}
    values = oracle_values(roots, oracle, est, est.gamma)
    live = [i for i, t in enumerate(roots) if not t.infra_error and t.steps]
    per_episode = [{**{name: np.asarray(adv[name][i], dtype=float) for name in adv},
                    "true": values[i]["all"]["a"], "half_a": values[i]["half_a"]["a"], "half_b": values[i]["half_b"]["a"]}
                   for i in live]
    rng = np.random.default_rng(SEED)
    result = bootstrap(per_episode, list(adv), "true", args.bootstrap, rng)
    halves = bootstrap(per_episode, ["half_a"], "half_b", args.bootstrap, rng)["half_a"]
    split_half = halves["pearson"]
    reliability = 2 * split_half / (1 + split_half)  # Spearman-Brown: N continuations from two halves of N/2
    true_a = np.concatenate([e["true"] for e in per_episode])
    record = {
        "command": command(__file__, sys.argv[1:]),
        "code_version": version,
        "load_average": [load0, load_average()],
        "setup": {"preset": "household-tiny", "warm_start": f"the preset's tiny model and SFT, seed {SEED}",
                  "warm_start_hash": warm_hash, "seed": SEED, "tasks": len(tasks), "group_size": r.group_size,
                  "temperature": r.temperature, "gamma": est.gamma, "invalid_penalty": est.invalid_penalty,
                  "tree_k": k, "tree_every": every, "continuations": args.continuations,
                  "bootstrap": args.bootstrap, "torch_threads": torch.get_num_threads()},
        "root_episodes": len(live), "root_success": float(np.mean([roots[i].success for i in live])),
        "steps": int(len(true_a)),
        "env_steps": {"gigpo": int(sum(len(t.steps) for t in roots)), "grpo": int(sum(len(t.steps) for t in roots)),
                      "tree": int(sum(len(t.steps) for t in roots + tree_branches[every])),
                      "tree_every3": int(sum(len(t.steps) for t in roots + tree_branches[3])),
                      "oracle": int(sum(len(t.steps) for t in oracle))},
        "true_advantage": {"mean": float(true_a.mean()), "std": float(true_a.std()),
                           "nonzero_share": float(np.mean(np.abs(true_a) > 1e-9))},
        "oracle_split_half": {"pearson": split_half, "pearson_ci": halves["pearson_ci"],
                              "reliability": reliability, "ceiling": float(np.sqrt(max(reliability, 0.0)))},
        "estimators": result,
        "cpu_seconds": {"warm_start_load": warm_cpu, "rollout": rollout_cpu, "total": process_cpu_seconds()},
        "wall_seconds": {"rollout": rollout_wall, "total": time.perf_counter() - wall0},
    }
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    for name, row in result.items():
        print(f"{name}: pearson {row['pearson']:+.3f} {row['pearson_ci']}  spearman {row['spearman']:+.3f} "
              f"{row['spearman_ci']}")
    print(f"oracle split-half {split_half:.3f}, ceiling {record['oracle_split_half']['ceiling']:.3f}; "
          f"{record['steps']} steps, rollout {rollout_cpu:.0f} CPU s")


if __name__ == "__main__":
    main()
