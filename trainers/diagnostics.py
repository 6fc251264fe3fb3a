"""What RL is meant to change, measured on each iteration's rollouts (issue 35).

Each step of a batch is one of three kinds:

    invalid   the env refused the action (`action_valid` false)
    idle      a valid command that changes nothing in the world: one starting with a prefix the
              env's task space declares (`idle_commands`; household: look / inventory /
              examine); an env that declares none has no idle steps
    useful    every other valid step

and `credit_diagnostics` reports, for a batch and the advantages it trained on:

    idle_frac        idle steps / valid steps (the demonstrator's habit RL should unlearn)
    invalid_rate     invalid steps / all steps
    adv_total.<kind>     mean advantage on steps of that kind
    adv_episode.<kind>   mean episode part (A^E; GRPO/RLOO: the whole advantage)
    adv_step.<kind>      mean step part (GiGPO: omega * A^S), absent for estimators without one
    steps.<kind>         how many steps of that kind

A mean over no steps is None (JSON null), never 0: "no idle steps" is not "zero credit on idling".
Infra-error episodes are left out, as the estimators leave them out. Pure functions of the
trajectories and arrays: no torch, no policy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from agentgym.trainers.records import advantage_parts
from agentgym.trajectory import Trajectory

KINDS = ("useful", "idle", "invalid")


def step_kind(step, idle_prefixes: Sequence[str] = ()) -> str:
    """'invalid', 'idle' or 'useful' for one step (see the module docstring)."""
    if not step.action_valid:
        return "invalid"
    action = (step.action or "").strip().lower()
    return "idle" if action.startswith(tuple(idle_prefixes)) else "useful"


def step_kinds(trajectories: Sequence[Trajectory], idle_prefixes: Sequence[str] = ()) -> list[np.ndarray]:
    """Per trajectory, the kind of each step (an array of strings)."""
    return [np.array([step_kind(s, idle_prefixes) for s in t.steps], dtype=object) for t in trajectories]


def _mean(values: np.ndarray, mask: np.ndarray) -> float | None:
    return float(values[mask].mean()) if mask.any() else None


def means_by_kind(values: Sequence[np.ndarray], kinds: Sequence[np.ndarray], live: Sequence[bool]) -> dict:
    """Mean of per-step `values` over the steps of each kind, live trajectories only."""
    flat_v = [np.asarray(v, dtype=np.float64) for v, ok in zip(values, live) if ok]
    flat_k = [k for k, ok in zip(kinds, live) if ok]
    v = np.concatenate(flat_v) if flat_v else np.zeros(0)
    k = np.concatenate(flat_k) if flat_k else np.zeros(0, dtype=object)
    if len(v) != len(k):
        raise ValueError(f"{len(v)} per-step values for {len(k)} steps: one value per step of each trajectory")
    return {kind: _mean(v, k == kind) for kind in KINDS}


def credit_diagnostics(trajectories: Sequence[Trajectory], advantages: Sequence[np.ndarray] | None = None,
                       parts: dict[str, Sequence[np.ndarray]] | None = None,
                       idle_prefixes: Sequence[str] = ()) -> dict:
    """Idle fraction, invalid rate and the mean advantage (and its parts) on useful, idle and
    invalid steps. `advantages[i][t]` is step t of trajectory i's advantage; `parts` maps a part
    name ("episode", "step") to arrays of the same shape (trainers/records.py:advantage_parts)."""
    live = [not t.infra_error for t in trajectories]
    kinds = step_kinds(trajectories, idle_prefixes)
    live_kinds = np.concatenate([k for k, ok in zip(kinds, live) if ok] or [np.zeros(0, dtype=object)])
    counts = {kind: int((live_kinds == kind).sum()) for kind in KINDS}
    valid = counts["useful"] + counts["idle"]
    out: dict = {
        "idle_frac": counts["idle"] / valid if valid else None,
        "invalid_rate": counts["invalid"] / len(live_kinds) if len(live_kinds) else None,
        "steps": counts,
    }
    if advantages is not None:
        out["adv_total"] = means_by_kind(advantages, kinds, live)
    for name, values in (parts or {}).items():
        out[f"adv_{name}"] = means_by_kind(values, kinds, live)
    return out


def iteration_credit(trajectories: Sequence[Trajectory], advantages: Sequence[np.ndarray], est_cfg,
                     idle_prefixes: Sequence[str] = ()) -> dict:
    """credit_diagnostics with the estimator's own parts: the trainer's per-iteration call, given
    the env's idle commands (agentgym.tasks.protocol.idle_commands of its task space)."""
    return credit_diagnostics(trajectories, advantages, advantage_parts(trajectories, est_cfg), idle_prefixes)
