"""The vectorized estimators against plain-loop transcriptions of the equations on random batches.

The reference code below is deliberately naive (dicts and Python loops, one equation per line)
so that it is easy to check by eye; the hand-computed tests pin the numbers, these pin the
bookkeeping (variable lengths, many groups, revisited anchors, infra_error episodes).
"""

import numpy as np
import pytest

from agentgym.trainers.estimators import EstimatorConfig, compute_advantages


def ref_std(xs):
    return float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0


def ref_gigpo(trajs, gamma, omega, norm_std, eps, penalty):
    live = [t for t in trajs if not t.infra_error]
    outcomes = {}
    for t in live:
        outcomes.setdefault(t.group_id, []).append(t.score)
    returns = {}
    anchor_returns = {}
    for k, t in enumerate(trajs):
        if t.infra_error:
            continue
        g, rets = 0.0, []
        for s in reversed(t.steps):
            g = s.reward - penalty * (not s.action_valid) + gamma * g
            rets.append(g)
        rets.reverse()
        returns[k] = rets
        for s, r in zip(t.steps, rets):
            anchor_returns.setdefault((t.group_id, s.anchor), []).append(r)
    out = []
    for k, t in enumerate(trajs):
        if t.infra_error:
            out.append(np.zeros(len(t.steps)))
            continue
        rs = outcomes[t.group_id]
        ae = 0.0 if len(rs) < 2 else (t.score - np.mean(rs)) / ((ref_std(rs) + eps) if norm_std else 1.0)
        row = []
        for s, r in zip(t.steps, returns[k]):
            grp = anchor_returns[(t.group_id, s.anchor)]
            a_s = 0.0 if len(grp) < 2 else (r - np.mean(grp)) / ((ref_std(grp) + eps) if norm_std else 1.0)
            row.append(ae + omega * a_s)
        out.append(np.array(row))
    return out


def ref_gae(traj, values, gamma, lam):
    T = len(traj.steps)
    v = list(values[:T]) + [values[T] if len(values) > T and not traj.terminated else 0.0]
    adv, running = [0.0] * T, 0.0
    for t in reversed(range(T)):
        delta = traj.steps[t].reward + gamma * v[t + 1] - v[t]
        running = delta + gamma * lam * running
        adv[t] = running
    return np.array(adv)


def random_batch(rng, traj, groups=5, size=4, states=4):
    trajs = []
    for g in range(groups):
        for _ in range(size):
            n = int(rng.integers(0, 9))
            rewards = list(rng.choice([0.0, 0.0, 0.5, 1.0], size=n))
            anchors = [f"s{rng.integers(states)}" for _ in range(n)]
            valid = list(rng.random(n) < 0.8)
            trajs.append(traj(f"g{g}", rewards, anchors=anchors, valid=valid,
                              score=float(rng.choice([0.0, 0.25, 1.0])), infra=bool(rng.random() < 0.1)))
    order = rng.permutation(len(trajs))  # groups interleaved in the batch
    return [trajs[i] for i in order]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("norm_std", [True, False])
def test_gigpo_matches_reference(traj, seed, norm_std):
    rng = np.random.default_rng(seed)
    trajs = random_batch(rng, traj)
    cfg = EstimatorConfig(name="gigpo", gamma=0.9, omega=0.7, norm_std=norm_std, invalid_penalty=0.1)
    got = compute_advantages(trajs, cfg)
    want = ref_gigpo(trajs, 0.9, 0.7, norm_std, cfg.eps, 0.1)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_gae_matches_reference(traj, seed):
    rng = np.random.default_rng(seed)
    trajs = random_batch(rng, traj)
    for t in trajs:
        t.infra_error = False
        t.terminated = bool(rng.random() < 0.5)
    values = [rng.normal(size=len(t.steps) + int(rng.integers(0, 2))) for t in trajs]
    got = compute_advantages(trajs, EstimatorConfig(name="ppo", gamma=0.95, lam=0.9), values=values)
    for t, v, g in zip(trajs, values, got):
        np.testing.assert_allclose(g, ref_gae(t, v, 0.95, 0.9), atol=1e-5)


@pytest.mark.parametrize("name", ["grpo", "rloo", "gigpo"])
def test_batch_order_does_not_matter(traj, name):
    # advantages are a function of each trajectory and its group, not of where it sits in the batch
    rng = np.random.default_rng(7)
    trajs = random_batch(rng, traj)
    cfg = EstimatorConfig(name=name, invalid_penalty=0.1)
    base = compute_advantages(trajs, cfg)
    perm = rng.permutation(len(trajs))
    shuffled = compute_advantages([trajs[i] for i in perm], cfg)
    for j, i in enumerate(perm):
        np.testing.assert_allclose(shuffled[j], base[i], atol=1e-6)
