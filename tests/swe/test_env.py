"""SWEEnv end to end in the bwrap sandbox: oracle, grading, bad input, limits, infra errors."""


import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core import INFO_KEYS
from agentgym.envs.swe import sandbox_bwrap
from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.sandbox import SandboxUnavailable
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.tools import format_call
from agentgym.errors import ConfigError
from agentgym.tasks import validation as _validation

SPACE = SWETaskSpace()


def first(split):
    return SPACE.split(split)[0]


def play(env, actions):
    out = []
    for a in actions:
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.fixture
def env():
    e = SWEEnv()
    yield e
    e.close()


@pytest.mark.sandbox
@pytest.mark.parametrize("split", ["train", "heldout", "heldout_unseen"])
def test_oracle_solves_one_task_per_split(env, split):
    task = first(split)
    obs, info = env.reset(options={"task": task})
    assert task.params["issue"] in obs and all(k in info for k in INFO_KEYS)
    steps = play(env, SPACE.solve(task))
    obs, reward, terminated, truncated, info = steps[-1]
    assert terminated and not truncated
    assert info["success"] and info["score"] == 1.0 and reward == 1.0, obs


@pytest.mark.sandbox
def test_submit_without_fix_fails_and_reward_is_partial_credit(env):
    task = first("train")
    env.reset(options={"task": task})
    obs, reward, terminated, _, info = env.step("submit")
    assert terminated and not info["success"] and reward == 0.0 and info["score"] == 0.0
    assert "0/" in obs


@pytest.mark.sandbox
def test_hidden_tests_not_in_workspace_and_tampering_does_not_help(env):
    task = first("train")
    obs, _ = env.reset(options={"task": task})
    assert "hidden_tests" not in obs
    o, *_ = env.step("bash ls -R; find / -name '*hidden*' -not -path '/proc/*' 2>/dev/null | head")
    assert "hidden_tests" not in o
    # Rewriting the visible tests and adding a conftest that passes everything changes nothing.
    env.step(format_call("create", path="conftest.py",
                         content="import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                                 "    out = yield\n    out.get_result().outcome = 'passed'\n"))
    env.step("bash rm -rf tests && mkdir tests && echo 'def test_ok(): pass' > tests/test_ok.py")
    *_, info = env.step("submit")
    assert not info["success"] and info["score"] == 0.0


@pytest.mark.sandbox
def test_text_actions_solve_a_task(env):
    task = first("heldout")
    p = task.params
    env.reset(options={"task": task})
    action = f"str_replace {p['file']}\n<<<<<<< SEARCH\n{p['after']}\n=======\n{p['before']}\n>>>>>>> REPLACE"
    obs, _, _, _, info = env.step(action)
    assert info["action_valid"], obs
    o, *_ = env.step("run_tests")
    assert "passed" in o
    *_, info = env.step("submit")
    assert info["success"]


@pytest.mark.sandbox
@pytest.mark.parametrize("bad", [
    "", "{not json", '{"name": "format_disk"}', '[{"name": "submit"}, {"name": "bash"}]', "dance",
    format_call("view", path="/etc/passwd"), format_call("view", path="../../../etc/shadow"),
    format_call("create", path="/tmp/x", content="x"), format_call("create", path="../escape.txt", content="x"),
    format_call("str_replace", path="missing.py", old_str="a", new_str="b"),
    format_call("view", path="README.md", start_line=10_000), '{"name": "bash", "arguments": {"command": 3}}',
    "view", "\x00", "[" * 10000,
])
def test_bad_input_is_an_error_observation_never_an_exception(env, bad):
    env.reset(options={"task": first("train")})
    obs, reward, terminated, truncated, info = env.step(bad)
    assert obs.startswith("Error") and info["action_valid"] is False
    assert reward == 0.0 and not terminated and not truncated
    assert all(k in info for k in INFO_KEYS)


@pytest.mark.sandbox
def test_anchor_tracks_the_workspace_state(env):
    task = first("train")
    p = task.params
    _, info0 = env.reset(options={"task": task})
    _, _, _, _, info1 = env.step("bash echo hello > notes.txt")
    _, _, _, _, info2 = env.step("bash rm notes.txt")
    _, _, _, _, info3 = env.step("view README.md")
    assert info1["anchor"] != info0["anchor"]
    assert info2["anchor"] == info0["anchor"] == info3["anchor"]
    _, info4 = env.reset(options={"task": task})
    assert info4["anchor"] == info0["anchor"]


@pytest.mark.sandbox
def test_step_limit_grades_the_work():
    env = gym.make("agentgym/SWE-v0", max_steps=2)
    task = first("train")
    env.reset(options={"task": task})
    p = task.params
    env.step(format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["before"]))
    obs, reward, terminated, truncated, info = env.step("bash true")
    assert truncated and info["success"] and reward == 1.0
    env.close()


@pytest.mark.sandbox
def test_long_output_is_truncated_with_marker(env):
    env.reset(options={"task": first("train")})
    obs, *_ = env.step("bash seq 1 100000")
    assert "characters truncated" in obs and len(obs) < 9000


def test_missing_bwrap_is_an_infra_error(monkeypatch):
    """No bwrap: reset raises (the rollout marks infra_error) instead of scoring a failure."""
    monkeypatch.setattr(sandbox_bwrap, "bwrap_path", lambda: None)
    env = SWEEnv()
    with pytest.raises(SandboxUnavailable):
        env.reset(options={"task": first("train")})
    env.close()


def test_rollout_marks_broken_sandbox_infra_error(monkeypatch):
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.rollout import collect

    monkeypatch.setattr(sandbox_bwrap, "bwrap_path", lambda: None)
    trajs = collect("agentgym/SWE-v0", [first("train")], OraclePolicy(SPACE), group_size=1, chat={"parser": "json"})
    assert trajs[0].infra_error and not trajs[0].success


def test_backend_must_be_known_and_local_is_explicit():
    with pytest.raises(ConfigError):
        SWEEnv(backend="chroot")
    assert SWEEnv().backend == "bwrap"


def test_local_backend_runs_the_oracle_when_asked_for():
    env = SWEEnv(backend="local")
    task = first("heldout_unseen")
    env.reset(options={"task": task})
    *_, info = play(env, SPACE.solve(task))[-1]
    assert info["success"]
    env.close()


@pytest.mark.sandbox
def test_oracle_through_the_rollout_engine_with_json_tool_calls():
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.rollout import collect

    tasks = [first("train"), first("heldout_unseen")]
    trajs = collect("agentgym/SWE-v0", tasks, OraclePolicy(SPACE), group_size=1, chat={"parser": "json"})
    assert all(t.success and not t.infra_error for t in trajs)


@pytest.mark.sandbox
def test_check_env_passes():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("agentgym/SWE-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.sandbox
def test_validate_uses_the_oracle():
    assert _validation.validate(SPACE, first("heldout"))
    broken = SPACE.split("train")[1]
    from agentgym.tasks.spec import TaskSpec

    bad = TaskSpec(broken.env_id, params={**broken.params, "FAIL_TO_PASS": ["tests/nope.py::test_missing"]}, seed=0)
    assert not _validation.validate(SPACE, bad)


def test_workspaces_are_removed_on_reset_and_close():
    env = SWEEnv()
    env.reset(options={"task": first("train")})
    ws1 = env.workspace
    env.reset(options={"task": first("heldout")})
    ws2 = env.workspace
    assert not ws1.exists() and ws2.exists()
    env.close()
    assert not ws2.exists() and not ws2.parent.exists()
