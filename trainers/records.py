"""Trajectory records of a run, for `agentgym view`: what the agent did and what it trained on.

With `log.save_trajectories_every = N` (0 = never) the trainer writes into the run dir

    trajectories/train_iter00005.jsonl   the episodes of iteration 1 and of every N-th iteration,
                                         each step with the advantage it trained on
    evals/iter00005/report.json          each held-out evaluation (0 = before RL) with its
    evals/iter00005/trajectories.jsonl   episodes

The files are ordinary Trajectory JSONL (agentgym.trajectory), so `load_trajectories` reads them;
what the viewer needs on top goes into each trajectory's `metadata`:

    iteration, estimator, category     which iteration, which advantage estimator, task category
    advantage: {"total": [...],        per step, the advantage written onto its response tokens
                "episode": [...],      the parts where the estimator has them: GiGPO's episode
                "step": [...]}         advantage A^E and omega * A^S; GRPO/RLOO/LOOP's episode one
    tokens: [[str, ...], ...]          per step, each response token as text (logprobs on hover)
    drop_abs_adv_below                 steps with |total| below it left the loss
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from agentgym.trajectory import Trajectory, save_trajectories
from agentgym.trainers.estimators import estimator_spec
from agentgym.trainers.estimators.common import FlatBatch
from agentgym.evaluation.report import write_report
from agentgym.registration import get_task_space
from agentgym.tasks.spec import TaskSpec

TRAJECTORY_DIR = "trajectories"
EVAL_DIR = "evals"


def train_path(run_dir: str | Path, iteration: int) -> Path:
    return Path(run_dir) / TRAJECTORY_DIR / f"train_iter{iteration:05d}.jsonl"


def eval_dir(run_dir: str | Path, iteration: int) -> Path:
    return Path(run_dir) / EVAL_DIR / f"iter{iteration:05d}"


def should_save(every: int, iteration: int) -> bool:
    """Iteration numbers count from 1; the first is always kept so that a short run has one."""
    return bool(every) and every > 0 and (iteration == 1 or iteration % every == 0)


def advantage_parts(trajectories: Sequence[Trajectory], est_cfg) -> dict[str, list[np.ndarray]]:
    """The episode and step parts of the advantage for estimators that are built from them."""

    spec = estimator_spec(est_cfg.name)
    if spec.parts is None:
        return {}
    batch = FlatBatch.build(trajectories, est_cfg)
    return {part: batch.split(np.asarray(flat, dtype=np.float64)) for part, flat in spec.parts(batch, est_cfg).items()}


def _category(space, traj: Trajectory) -> str | None:
    if space is None or not traj.task:
        return None
    try:
        return str(space.category(TaskSpec.from_dict(traj.task)))
    except Exception:  # an env without categories, or a task dict it cannot read
        return None


def _task_space(trajectories: Sequence[Trajectory]):
    env_id = next((t.env_id for t in trajectories if t.env_id), "")
    try:
        return get_task_space(env_id) if env_id else None
    except Exception:
        return None


def annotate(trajectories: Sequence[Trajectory], *, iteration: int, advantages: Sequence | None = None,
             est_cfg=None, decode: Callable[[int], str] | None = None, drop_abs_adv_below: float = 0.0) -> None:
    """Write the viewer's metadata onto each trajectory (in place)."""
    space = _task_space(trajectories)
    parts = advantage_parts(trajectories, est_cfg) if (advantages is not None and est_cfg is not None) else {}
    for i, traj in enumerate(trajectories):
        meta = traj.metadata
        meta["iteration"] = iteration
        if (category := _category(space, traj)) is not None:
            meta["category"] = category
        if advantages is not None:
            meta["estimator"] = est_cfg.name if est_cfg is not None else None
            adv = {"total": [float(a) for a in advantages[i]]}
            for key, values in parts.items():
                adv[key] = [float(a) for a in values[i]]
            meta["advantage"] = adv
            meta["drop_abs_adv_below"] = float(drop_abs_adv_below)
        if decode is not None:
            meta["tokens"] = [[decode(int(t)) for t in (s.response_ids or [])] for s in traj.steps]


def token_decoder(policy) -> Callable[[int], str] | None:
    """id -> text of one token, from a policy's tokenizer (None when it has none)."""
    tokenizer = getattr(policy, "tokenizer", None)  # HFPolicy, and the vLLM wrapper forwards it
    if tokenizer is None:
        return None
    cache: dict[int, str] = {}

    def decode(token: int) -> str:
        if token not in cache:
            cache[token] = tokenizer.decode([token], skip_special_tokens=False)
        return cache[token]

    return decode


def save_iteration(log_cfg, run_dir: Path, iteration: int, trajectories: Sequence[Trajectory], advantages: Sequence,
                   est_cfg, policy=None, drop_abs_adv_below: float = 0.0) -> Path | None:
    """The trainer's hook after the advantages of iteration `iteration` (0-based) are known; the
    samples below drop_abs_adv_below (ppo.drop_abs_adv_below) are marked as not trained on."""
    if not should_save(log_cfg.save_trajectories_every, iteration + 1):
        return None

    copies = [Trajectory.from_dict(t.to_dict()) for t in trajectories]  # the trainer's own stay untouched
    annotate(copies, iteration=iteration + 1, advantages=advantages, est_cfg=est_cfg,
             decode=token_decoder(policy) if policy is not None else None,
             drop_abs_adv_below=drop_abs_adv_below)
    path = train_path(Path(run_dir), iteration + 1)
    save_trajectories(path, copies)
    return path


def save_evaluation(log_cfg, run_dir: Path, result, iteration: int | None, policy=None) -> Path | None:
    """The trainer's hook after a held-out evaluation (iteration 0 = before RL)."""
    if iteration is None or log_cfg.save_trajectories_every <= 0:
        return None

    annotate(result.trajectories, iteration=iteration, decode=token_decoder(policy) if policy is not None else None)
    out = eval_dir(Path(run_dir), iteration)
    write_report(result, out, plot=False, title=f"held-out evaluation at iteration {iteration}",
                 save_trajectories=True)
    return out
