"""Trajectory.to_dict: the same dict dataclasses.asdict gives, sharing nothing mutable."""

import dataclasses

from agentgym.trajectory import Step, Trajectory


def _trajectory() -> Trajectory:
    step = Step(observation="You are in a room.", anchor="room", text="go to desk 1", action="go to desk 1",
                action_valid=True, reward=0.5, prompt_ids=[5, 6, 7], response_ids=[8, 9],
                response_logprobs=[-0.1, -0.2], messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                policy_version=3)
    return Trajectory(task_id="t", group_id="g", env_id="agentgym/Household-v0", seed=1, steps=[step, Step("a", "b")],
                      success=True, score=1.0, task={"goal": {"object": "mug", "places": ["desk 1"]}},
                      metadata={"tags": ["x"], "nested": {"k": [1, 2]}})


def test_to_dict_equals_asdict():
    traj = _trajectory()
    assert traj.to_dict() == dataclasses.asdict(traj)
    assert traj.steps[0].to_dict() == dataclasses.asdict(traj.steps[0])


def test_to_dict_shares_nothing_mutable():
    traj = _trajectory()
    d = traj.to_dict()
    d["steps"][0]["prompt_ids"].append(0)
    d["steps"][0]["response_logprobs"][0] = 9.0
    d["steps"][0]["messages"][0]["content"][0]["text"] = "changed"
    d["task"]["goal"]["places"].append("shelf 1")
    d["metadata"]["nested"]["k"].append(3)
    assert traj.to_dict() == dataclasses.asdict(_trajectory())


def test_round_trip():
    traj = _trajectory()
    assert Trajectory.from_dict(traj.to_dict()) == traj
