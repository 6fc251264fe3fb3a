"""Shared machinery of the advantage estimators: a flat view of a batch of trajectories,
group bookkeeping, segment statistics and discounted scans.

Every estimator works on the same `FlatBatch`: all steps of all trajectories laid end to
end in numpy arrays, with the trajectory, group and time index of each step. Group
statistics are then `np.bincount` reductions over integer segment ids instead of Python
loops over dicts, which keeps GiGPO on 128 x 50 steps in a few milliseconds.

Conventions shared by all estimators (documented once here):
- A group is the set of trajectories with equal `group_id`.
- `infra_error` trajectories are left out of every statistic and get all-zero advantages.
- Standard deviations use the unbiased estimator (ddof=1), as `torch.std` does in the
  public GRPO (verl) and GiGPO (verl-agent) code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from agentgym.errors import ConfigError
from agentgym.trajectory import Trajectory

if TYPE_CHECKING:  # only for type hints; estimators.py imports this module
    from agentgym.trainers.estimators import EstimatorConfig


@dataclass(frozen=True)
class EstimatorSpec:
    """What one advantage estimator is and what the trainer must give it: declared once, next to its
    function, and asked by the config check, the loop and the async engine (never the name).

    fn: `fn(batch: FlatBatch, cfg, values=None, progress=None)` -> one advantage per step (flat) or
        one array per trajectory.
    group_relative: the baseline comes from the other episodes of the group; a group of one
        episode is refused (rollout.group_size >= 2).
    value_head: the trainer fits a value head and passes `values` (V(s_t) per step).
    progress_head: the trainer fits a progress head and passes `progress` (c_t per step).
    asymmetric_clip: the PPO clip range [1/(1+eps), 1+eps] is this method's default
        (ppo.asymmetric_clip overrides it).
    parts: optional `parts(batch, cfg)` -> {"episode": flat array, "step": ...}, the additive parts
        of the advantage, kept with saved trajectories so the viewer can show them.
    policy_loss: the name of the loss in trainers/policy_losses.py:POLICY_LOSSES the update uses.
    loss_agg: how token losses are aggregated ("token-mean", "seq-mean", "token-sum"); None: ppo.loss_agg.
    options: the method's own options and their defaults (set with estimator.options.<name>=value).
    dynamic_sampling: groups whose outcomes are all equal are left out of the update (DAPO).
    """

    name: str
    fn: Any
    group_relative: bool = False
    value_head: bool = False
    progress_head: bool = False
    asymmetric_clip: bool = False
    parts: Any = None
    policy_loss: str = "ppo"
    loss_agg: str | None = None
    options: Any = field(default_factory=dict)
    dynamic_sampling: bool = False

    @property
    def fits_heads(self) -> bool:
        """The method trains a head on the hidden states of the weights that generated the batch."""
        return self.value_head or self.progress_head


def no_verdict(traj: Trajectory) -> bool:
    """A judged reward gave this episode no verdict (agentgym.rewards): its outcome is unknown, not 0,
    so it is left out of every statistic and gets zero advantages, like an infra_error episode."""
    return bool(traj.metadata.get("no_verdict")) if traj.metadata else False


def describe_trajectory(index: int, traj: Trajectory) -> str:
    return f"trajectory {index} (task_id={traj.task_id!r}, group_id={traj.group_id!r})"


def as_float_array(x: Any) -> np.ndarray:
    """numpy view of a list, array or (CPU/GPU, grad or not) torch tensor, without importing torch."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64).reshape(-1)


@dataclass
class FlatBatch:
    """All steps of a batch laid end to end.

    Step arrays (length = total number of steps): `reward` (raw env reward minus the
    invalid-action penalty), `valid` (action_valid), `traj` (trajectory index), `time`
    (step index inside its trajectory), `group` (group index), `live` (False for steps of
    infra_error trajectories). Trajectory arrays (length = number of trajectories):
    `lengths`, `offsets`, `outcome` (R_i), `traj_group`, `traj_live`, `group_size`
    (episodes per group, infra_error ones included: the configured group size).
    """

    trajectories: Sequence[Trajectory]
    reward: np.ndarray
    valid: np.ndarray
    traj: np.ndarray
    time: np.ndarray
    group: np.ndarray
    live: np.ndarray
    lengths: np.ndarray
    offsets: np.ndarray
    outcome: np.ndarray
    traj_group: np.ndarray
    traj_live: np.ndarray
    group_size: np.ndarray
    group_names: list[str]

    @property
    def num_traj(self) -> int:
        return len(self.lengths)

    @property
    def num_groups(self) -> int:
        return len(self.group_names)

    @property
    def max_len(self) -> int:
        return int(self.lengths.max()) if len(self.lengths) else 0

    @classmethod
    def build(cls, trajectories: Sequence[Trajectory], cfg: "EstimatorConfig") -> "FlatBatch":
        n = len(trajectories)
        lengths = np.fromiter((len(t.steps) for t in trajectories), dtype=np.int64, count=n)
        total = int(lengths.sum())
        offsets = np.zeros(n, dtype=np.int64)
        if n:
            np.cumsum(lengths[:-1], out=offsets[1:])

        reward = np.fromiter((s.reward for t in trajectories for s in t.steps), dtype=np.float64, count=total)
        valid = np.fromiter((s.action_valid for t in trajectories for s in t.steps), dtype=bool, count=total)
        traj = np.repeat(np.arange(n, dtype=np.int64), lengths)
        time = np.arange(total, dtype=np.int64) - np.repeat(offsets, lengths)

        group_index: dict[str, int] = {}
        traj_group = np.fromiter(
            (group_index.setdefault(t.group_id, len(group_index)) for t in trajectories), dtype=np.int64, count=n
        )
        traj_live = np.fromiter((not t.infra_error and not no_verdict(t) for t in trajectories), dtype=bool, count=n)
        if cfg.outcome == "score":
            outcome = np.fromiter((t.score for t in trajectories), dtype=np.float64, count=n)
        elif cfg.outcome == "success":
            outcome = np.fromiter((bool(t.success) for t in trajectories), dtype=np.float64, count=n)
        else:  # "return": the sum of env rewards, the paper's R_i = sum_t r_t
            outcome = np.fromiter((t.total_reward for t in trajectories), dtype=np.float64, count=n)

        _check_rewards_finite(trajectories, traj_live, reward, traj, outcome)
        # Whatever a crashed episode recorded (NaN included) must not leak into sums with the
        # live ones: zero it once here, the masks keep it out of every statistic after that.
        reward = np.where(traj_live[traj], reward, 0.0)
        outcome = np.where(traj_live, outcome, 0.0)
        # The penalty is applied after the finiteness check so the error names the raw reward.
        if cfg.invalid_penalty and cfg.penalty_placement == "reward":
            reward = reward - cfg.invalid_penalty * (~valid)

        return cls(
            trajectories=trajectories,
            reward=reward,
            valid=valid,
            traj=traj,
            time=time,
            group=traj_group[traj],
            live=traj_live[traj],
            lengths=lengths,
            offsets=offsets,
            outcome=outcome,
            traj_group=traj_group,
            traj_live=traj_live,
            group_size=np.bincount(traj_group, minlength=len(group_index)),
            group_names=list(group_index),
        )

    def split(self, flat_values: np.ndarray) -> list[np.ndarray]:
        """Per-step flat array -> one float32 array per trajectory; infra_error ones zeroed."""
        out = np.where(self.live, flat_values, 0.0).astype(np.float32)
        return np.split(out, self.offsets[1:]) if self.num_traj else []

    def broadcast(self, per_traj: np.ndarray) -> np.ndarray:
        """Per-trajectory value -> per-step flat array (the episode advantage of every step)."""
        return per_traj[self.traj]

    def padded(self, flat_values: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """[num_traj, max_len] matrix with the steps of trajectory i in row i, `fill` after its end."""
        mat = np.full((self.num_traj, self.max_len), fill, dtype=np.float64)
        mat[self.traj, self.time] = flat_values
        return mat

    def unpad(self, mat: np.ndarray) -> np.ndarray:
        return mat[self.traj, self.time]

    def require_groups(self, estimator: str) -> None:
        """Group-relative estimators need >= 2 episodes per group to have a baseline at all."""
        lonely = np.flatnonzero(self.group_size < 2)
        if len(lonely):
            name = self.group_names[int(lonely[0])]
            raise ConfigError(
                f"estimator {estimator!r} compares episodes within a group, but group {name!r} has 1 episode: "
                f"set group_size >= 2 (or use estimator 'gae', which needs no group)"
            )


def _check_rewards_finite(trajectories, traj_live, reward, traj, outcome) -> None:
    # infra_error trajectories are excluded from everything, so whatever they carry is ignored.
    bad_steps = np.flatnonzero(~np.isfinite(reward) & traj_live[traj])
    if len(bad_steps):
        i = int(traj[bad_steps[0]])
        t = int(bad_steps[0] - np.flatnonzero(traj == i)[0])
        raise ValueError(
            f"{describe_trajectory(i, trajectories[i])} has a non-finite reward ({reward[bad_steps[0]]}) at step {t}"
        )
    bad_traj = np.flatnonzero(~np.isfinite(outcome) & traj_live)
    if len(bad_traj):
        i = int(bad_traj[0])
        raise ValueError(f"{describe_trajectory(i, trajectories[i])} has a non-finite outcome ({outcome[i]})")


def segment_stats(
    x: np.ndarray, seg: np.ndarray, num_seg: int, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-segment count, mean and unbiased std of x (entries where mask is False ignored).

    std is computed from deviations to the mean (two passes), which stays exact where
    E[x^2] - E[x]^2 would cancel; segments with fewer than 2 members get std 0.
    """
    w = np.ones_like(x) if mask is None else mask.astype(np.float64)
    count = np.bincount(seg, weights=w, minlength=num_seg)
    total = np.bincount(seg, weights=x * w, minlength=num_seg)
    mean = np.divide(total, count, out=np.zeros(num_seg), where=count > 0)
    dev = (x - mean[seg]) * w
    sq = np.bincount(seg, weights=dev * dev, minlength=num_seg)
    std = np.sqrt(np.divide(sq, count - 1, out=np.zeros(num_seg), where=count > 1))
    return count, mean, std


def group_normalized(
    x: np.ndarray, seg: np.ndarray, num_seg: int, mask: np.ndarray, norm_std: bool, eps: float
) -> np.ndarray:
    """(x - mean_seg) / (std_seg + eps) (or / 1 without norm_std); 0 for singleton segments and masked entries."""
    count, mean, std = segment_stats(x, seg, num_seg, mask)
    adv = x - mean[seg]
    if norm_std:
        adv = adv / (std[seg] + eps)
    # A segment of one has no baseline: its own value is its mean, so adv is already 0,
    # but set it explicitly so no rounding residue divided by eps survives.
    return np.where(mask & (count[seg] >= 2), adv, 0.0)


def discounted_returns(batch: FlatBatch, rewards: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = r_t + gamma * G_{t+1}, G_T = 0, per trajectory; a backward scan over the padded matrix."""
    r = batch.padded(rewards)
    g = np.zeros_like(r)
    running = np.zeros(batch.num_traj)
    for t in range(batch.max_len - 1, -1, -1):
        running = r[:, t] + gamma * running  # padding is 0, so it adds nothing past the end
        g[:, t] = running
    return batch.unpad(g)


def gae(
    batch: FlatBatch,
    rewards: np.ndarray,
    values: Sequence[Any],
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16) over the steps of each trajectory.

    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t);  A_t = sum_k (gamma * lam)^k delta_{t+k}.
    `values[i]` holds V(s_t) for t = 0..T-1, optionally followed by V(s_T). After a
    terminated episode the bootstrap V(s_T) is 0; after one that did not terminate
    (truncated by the time limit or cut off by the rollout) it is values[i][T] when given,
    else 0 as if it had terminated.
    """
    if len(values) != batch.num_traj:
        raise ValueError(f"values has {len(values)} entries for {batch.num_traj} trajectories")
    v = np.zeros(len(rewards))
    bootstrap = np.zeros(batch.num_traj)
    for i, traj in enumerate(batch.trajectories):
        if not batch.traj_live[i]:
            continue
        vi = as_float_array(values[i])
        length = int(batch.lengths[i])
        if len(vi) not in (length, length + 1):
            raise ValueError(
                f"{describe_trajectory(i, traj)} has {length} steps but {len(vi)} values (expected {length} or {length + 1})"
            )
        if not np.all(np.isfinite(vi)):
            raise ValueError(f"{describe_trajectory(i, traj)} has a non-finite value estimate")
        start = int(batch.offsets[i])
        v[start : start + length] = vi[:length]
        if len(vi) == length + 1 and not traj.terminated:
            bootstrap[i] = vi[length]

    vmat = batch.padded(v)
    rmat = batch.padded(rewards)
    # next-state values: shift left, then put each row's bootstrap right after its last step
    next_v = np.zeros_like(vmat)
    next_v[:, :-1] = vmat[:, 1:]
    has_steps = batch.lengths > 0
    rows = np.flatnonzero(has_steps)
    next_v[rows, batch.lengths[rows] - 1] = bootstrap[rows]
    delta = rmat + gamma * next_v - vmat
    # zero the padding so the backward scan carries nothing in from beyond the end
    delta[~(np.arange(batch.max_len)[None, :] < batch.lengths[:, None])] = 0.0

    adv = np.zeros_like(delta)
    running = np.zeros(batch.num_traj)
    for t in range(batch.max_len - 1, -1, -1):
        running = delta[:, t] + gamma * lam * running
        adv[:, t] = running
    return batch.unpad(adv)

