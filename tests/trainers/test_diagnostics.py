"""trainers/diagnostics.py on hand-made trajectories: step kinds, idle fraction, invalid rate and
the advantage parts' means per kind, and the trainer's per-iteration record of them."""

from __future__ import annotations

import numpy as np
import pytest

from agentgym.registration import get_task_space
from agentgym.tasks.protocol import idle_commands
from agentgym.trainers.diagnostics import credit_diagnostics, iteration_credit, step_kind
from agentgym.trainers.estimators import EstimatorConfig
from agentgym.trajectory import Step, Trajectory

IDLE = idle_commands(get_task_space("agentgym/Household-v0"))  # look / inventory / examine


def step(action: str, valid: bool = True, anchor: str = "s0", reward: float = 0.0) -> Step:
    return Step(observation="", anchor=anchor, action=action, action_valid=valid, reward=reward)


def traj(steps, success=False, group="g", infra=False) -> Trajectory:
    return Trajectory(task_id="t", group_id=group, steps=steps, success=success, score=float(success),
                      infra_error=infra)


def test_step_kinds():
    assert step_kind(step("look"), IDLE) == "idle"
    assert step_kind(step("inventory"), IDLE) == "idle"
    assert step_kind(step("examine apple 1"), IDLE) == "idle"
    assert step_kind(step("go to fridge 1"), IDLE) == "useful"
    assert step_kind(step("take apple 1 from table 1"), IDLE) == "useful"
    assert step_kind(step("look", valid=False), IDLE) == "invalid"  # refused by the env: invalid whatever it says
    assert step_kind(step(None, valid=False), IDLE) == "invalid"  # did not parse


def test_idle_commands_are_the_envs_own():
    """Household declares its idle commands on its task space; an env that declares none (the
    default) has no idle steps, whatever its commands are called."""
    assert IDLE == ("look", "inventory", "examine ")
    assert idle_commands(get_task_space("agentgym/WebShop-v0")) == ()
    assert step_kind(step("look")) == "useful"
    out = credit_diagnostics([traj([step("look"), step("go to fridge 1")])], [np.array([1.0, 2.0])])
    assert out["steps"] == {"useful": 2, "idle": 0, "invalid": 0}


def test_fractions_and_means_by_kind():
    a = traj([step("look"), step("go to fridge 1"), step("fly", valid=False), step("take apple 1 from fridge 1")])
    b = traj([step("inventory"), step("examine fridge 1"), step("go to table 1")])
    dead = traj([step("look"), step("look")], infra=True)  # left out, as the estimators leave it out
    adv = [np.array([-1.0, 2.0, -3.0, 4.0]), np.array([-5.0, -7.0, 6.0]), np.array([100.0, 100.0])]
    out = credit_diagnostics([a, b, dead], adv, {"episode": adv, "step": [x * 0 for x in adv]}, IDLE)
    assert out["steps"] == {"useful": 3, "idle": 3, "invalid": 1}
    assert out["idle_frac"] == pytest.approx(3 / 6)  # of valid steps
    assert out["invalid_rate"] == pytest.approx(1 / 7)  # of all steps
    assert out["adv_total"] == {"useful": pytest.approx(4.0), "idle": pytest.approx(-13 / 3),
                                "invalid": pytest.approx(-3.0)}
    assert out["adv_step"]["idle"] == 0.0


def test_no_steps_of_a_kind_is_none_not_zero():
    out = credit_diagnostics([traj([step("go to fridge 1")])], [np.array([0.5])])
    assert out["idle_frac"] == 0.0
    assert out["adv_total"]["idle"] is None and out["adv_total"]["invalid"] is None
    with pytest.raises(ValueError, match="one value per step"):
        credit_diagnostics([traj([step("look")])], [np.array([1.0, 2.0])])


def test_iteration_credit_splits_gigpo_into_episode_and_step_parts():
    # Group of two episodes from the same start state s0. The winner idles (look, stays in s0),
    # then acts; the loser acts badly. GiGPO's parts must add up to its advantage on every kind.
    win = traj([step("look", anchor="s0"), step("go to fridge 1", anchor="s0", reward=1.0)], success=True)
    lose = traj([step("go to table 1", anchor="s0"), step("fly", valid=False, anchor="s1")])
    cfg = EstimatorConfig(name="gigpo", norm_std=False, gamma=0.9)
    from agentgym.trainers.estimators import compute_advantages

    adv = compute_advantages([win, lose], cfg)
    out = iteration_credit([win, lose], adv, cfg, IDLE)
    for kind in ("useful", "idle", "invalid"):
        total = out["adv_total"][kind]
        assert total == pytest.approx(out["adv_episode"][kind] + out["adv_step"][kind])
    assert out["adv_episode"]["idle"] == pytest.approx(0.5)  # the winner's episode advantage: 1 - mean(1, 0)
    # the idle step of the winner shares anchor s0 with better and worse steps: its step part is
    # its discounted return 0.9 minus the s0 group's mean (0.9 + 1.0 + 0.0) / 3
    assert out["adv_step"]["idle"] == pytest.approx(0.9 - 1.9 / 3)
    grpo = iteration_credit([win, lose], compute_advantages([win, lose], EstimatorConfig(name="grpo")),
                            EstimatorConfig(name="grpo"), IDLE)
    assert "adv_step" not in grpo and grpo["adv_episode"]["idle"] == pytest.approx(grpo["adv_total"]["idle"])
