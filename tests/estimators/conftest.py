import pytest

from agentgym.trajectory import Step, Trajectory


def build_traj(group, rewards=(), anchors=None, score=None, valid=None, infra=False, success=None,
               terminated=True, truncated=False, task_id=None):
    """A trajectory from per-step rewards; anchors default to "s<t>", actions valid, score = sum of rewards."""
    n = len(rewards)
    anchors = [f"s{t}" for t in range(n)] if anchors is None else list(anchors)
    valid = [True] * n if valid is None else list(valid)
    assert len(anchors) == n and len(valid) == n
    score = float(sum(rewards)) if score is None else score
    steps = [Step(observation=f"obs {a}", anchor=a, action_valid=v, reward=r) for r, a, v in zip(rewards, anchors, valid)]
    return Trajectory(
        task_id=task_id or f"task-{group}", group_id=group, steps=steps, score=score,
        success=bool(score >= 1.0) if success is None else success,
        terminated=terminated, truncated=truncated, infra_error=infra,
    )


@pytest.fixture
def traj():
    return build_traj
