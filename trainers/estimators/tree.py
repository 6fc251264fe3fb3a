"""Tree: step values measured from branches (tree rollouts, agentgym.rollout's `branch=`).

A tree rollout restores an episode's state at chosen steps and plays K more continuations from
there (the trajectories' metadata["tree"]: their id, their parent episode's id and the branch
step). Every state with several continuations gets a Monte Carlo value, and every step an
advantage against the value of its state, as in VinePPO (Kazemnejad et al. 2024, "VinePPO:
Unlocking RL Potential for LLM Reasoning Through Refined Credit Assignment", arXiv 2410.01679,
its MC value estimate and advantage) on the trees of TreeRPO / TreePO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, discounted_returns, segment_stats

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig

# the tree rollout's shape, read by the trainer (branch_config); the estimator itself reads the tree
OPTIONS = {"k": 2, "every": 1, "at": "every", "min_entropy": 1.0}


def tree_nodes(batch: FlatBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Per step: the node its state is a sample of (-1: none); the node whose value is its baseline
    (its own, else the latest on its way); the flat index of the step at that node; the node of its
    next state (-1: none); and the number of nodes.

    Nodes: each group's initial state (its root episodes and the branches from step 0 start
    there), and (root episode, step t > 0) for every step some branch starts from."""
    metas = [(t.metadata or {}).get("tree") or {} for t in batch.trajectories]
    groups = batch.traj_group.tolist()
    branched: dict[str, set[int]] = {}  # root id -> its steps that have branches (t > 0)
    for m in metas:
        if m.get("parent") is not None and m.get("step", 0) > 0:
            branched.setdefault(m["parent"], set()).add(int(m["step"]))
    index: dict[tuple, int] = {}
    total = len(batch.reward)
    own, base, at, nxt = np.full(total, -1), np.full(total, -1), np.full(total, -1), np.full(total, -1)
    for i, (m, g) in enumerate(zip(metas, groups)):
        start, length = int(batch.offsets[i]), int(batch.lengths[i])
        if length == 0:
            continue
        if m.get("parent") is not None:  # a branch: one sample of its start state; later steps have no node
            step = int(m.get("step", 0))
            node = index.setdefault(("start", g) if step == 0 else ("step", m["parent"], step), len(index))
            own[start] = node
            base[start:start + length] = node
            at[start:start + length] = start
            continue
        node_at = {0: index.setdefault(("start", g), len(index))}
        for t in sorted(branched.get(m.get("id"), ())):
            if t < length:
                node_at[t] = index.setdefault(("step", m.get("id"), t), len(index))
        current, where = node_at[0], start
        for t in range(length):
            if t in node_at:
                current, where = node_at[t], start + t
                own[start + t] = current
            base[start + t], at[start + t] = current, where
            if t + 1 in node_at:
                nxt[start + t] = node_at[t + 1]
    return own, base, at, nxt, len(index)


def tree_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values: Any = None, progress: Any = None) -> np.ndarray:
    """Advantages from the branches of a tree rollout.

        return:       G_t^j = r_t^j + gamma * G_{t+1}^j            (r_t includes -invalid_penalty)
        node value:   V(n) = 1/|S(n)| * sum over (j, u) in S(n) of G_u^j
        action value: Q(s_t^j, a_t^j) = r_t^j + gamma * V(n(s_{t+1}^j))   if s_{t+1}^j is a node
                                      = G_t^j                                otherwise
        at a node:    A_t^j = (Q(s_t^j, a_t^j) - V(n(s_t^j))) / F
        elsewhere:    A_u^j = (G_t^j - V(n(s_t^j))) / F,   t = the latest step before u at a node

    A node n is a state with several continuations: a group's initial state (S(n): the group's
    episodes and the branches from step 0) or the state of a root episode at a step t > 0 that
    has branches (S(n): that episode from t on, and each branch from its first step). A step at a
    node is credited with its own action's value against the node's; the steps between two nodes
    (a branch after its first step, a root between branched steps) share the advantage of the
    segment from their latest node, as GRPO's steps share their episode's. With branches at every
    step this is VinePPO's A_t = r_t + gamma V(s_{t+1}) - V(s_t) on the root episodes; without
    branches, the group-mean baseline (RLOO with the episode itself in the mean). F = std of the
    returns in S(n) + eps with `norm_std`, else 1. A step whose node has a single sample gets 0
    (nothing to compare with); infra_error episodes are left out of every value and get 0.
    """
    returns = discounted_returns(batch, batch.reward, cfg.gamma)
    own, base, at, nxt, num = tree_nodes(batch)
    sample = (own >= 0) & batch.live
    count, mean, std = segment_stats(returns, np.where(own >= 0, own, 0), num, sample)
    q = np.where(nxt >= 0, batch.reward + cfg.gamma * mean[np.maximum(nxt, 0)], returns)
    adv = np.where(own >= 0, q, returns[np.maximum(at, 0)]) - mean[base]
    if cfg.norm_std:
        adv = adv / (std[base] + cfg.eps)
    return np.where(batch.live & (count[base] >= 2), adv, 0.0)


def branch_config(estimator: Any):
    """The rollout's BranchConfig when the estimator learns from branches, else None."""
    from agentgym.rollout import BranchConfig
    from agentgym.trainers.estimators.options import resolve_options

    if getattr(estimator, "name", None) != "tree":
        return None
    o = resolve_options(SPECS[0], estimator.options)
    return BranchConfig(k=int(o["k"]), at=str(o["at"]), every=int(o["every"]), min_entropy=float(o["min_entropy"]))


SPECS = [EstimatorSpec("tree", tree_advantages, group_relative=True, options=OPTIONS)]
