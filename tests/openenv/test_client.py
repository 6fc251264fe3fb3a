"""agentgym/OpenEnv-v0: an OpenEnv server as a TextEnv, against our own served env and against
an OpenEnv-native env written here with OpenEnv's base classes (no agentgym code on its side)."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import pytest

import agentgym
from agentgym.core import INFO_KEYS

from .conftest import HOUSEHOLD, local_episode

pytest.importorskip("openenv")
pytestmark = pytest.mark.timeout(900)


def test_wrapped_served_env_passes_check_env_and_replays_locally(household_server):
    from gymnasium.utils.env_checker import check_env

    env = gym.make("agentgym/OpenEnv-v0", base_url=household_server.base_url)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        space = env.unwrapped.task_space
        assert space.split_names == ("train", "heldout", "heldout_unseen")
        remote_task = space.split("heldout")[1]
        local = agentgym.get_task_space(HOUSEHOLD)
        task = local.split("heldout")[1]
        plan = local.solve(task)
        expected = local_episode(task, plan, seed=remote_task.seed)
        obs, info = env.reset(options={"task": remote_task})
        assert obs == expected[0][0] and info == expected[0][2]  # the server's info, key for key
        for action, (want_obs, want_reward, want_info) in zip(plan, expected[1:]):
            obs, reward, terminated, truncated, info = env.step(action)
            assert (obs, reward, info) == (want_obs, want_reward, want_info)
        assert terminated and not truncated and info["success"]
    finally:
        env.close()


def test_collect_runs_on_an_openenv_server(household_server):
    from agentgym.policies import RandomPolicy

    space = gym.make("agentgym/OpenEnv-v0", base_url=household_server.base_url)
    tasks = space.unwrapped.task_space.split("heldout")[:2]
    space.close()
    trajs = agentgym.collect("agentgym/OpenEnv-v0", tasks, RandomPolicy(seed=0), group_size=2, max_turns=4,
                             env_kwargs={"base_url": household_server.base_url})
    assert len(trajs) == 4
    for a, b in (trajs[:2], trajs[2:]):
        assert a.steps[0].observation == b.steps[0].observation  # a group shares its initial state
        assert a.steps[0].anchor == b.steps[0].anchor
    assert all(len(t.steps) == 4 and not t.infra_error for t in trajs)
    assert trajs[0].steps[0].observation != trajs[2].steps[0].observation


def test_dead_url_is_one_clear_line():
    from agentgym.integrations.openenv_client import OpenEnvConnectionError
    from agentgym.integrations.openenv_server import free_port

    with pytest.raises(OpenEnvConnectionError, match=r"^cannot reach an OpenEnv server at http://127\.0\.0\.1:\d+ ") \
            as err:
        gym.make("agentgym/OpenEnv-v0", base_url=f"http://127.0.0.1:{free_port()}", connect_timeout_s=3)
    assert "\n" not in str(err.value)
    with pytest.raises(agentgym.AgentGymError, match="needs the server URL"):
        gym.make("agentgym/OpenEnv-v0")


# --- an OpenEnv-native env: its own field names, no anchor, no success, reward only ---------------

def _native_app():
    from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app

    class GuessAction(Action):
        guess: str

    class GuessObservation(Observation):
        hint: str = ""
        tries: int = 0

    class GuessEnvironment(Environment):
        """Guess the secret word (set by the reset seed); the hint says how close you are."""

        SUPPORTS_CONCURRENT_SESSIONS = True
        WORDS = ["apple", "banana", "cherry"]

        def __init__(self):
            super().__init__()
            self._state = State(step_count=0)
            self.secret = "apple"

        def reset(self, seed=None, episode_id=None, **kwargs):
            self.secret = self.WORDS[(seed or 0) % 3]
            self._state = State(episode_id=episode_id, step_count=0)
            return GuessObservation(hint=f"a fruit of {len(self.secret)} letters", tries=0)

        def step(self, action, timeout_s=None, **kwargs):
            self._state.step_count += 1
            right = action.guess == self.secret
            return GuessObservation(hint="yes!" if right else "no", tries=self._state.step_count, done=right,
                                    reward=1.0 if right else 0.0)

        @property
        def state(self):
            return self._state

    return create_fastapi_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=4)


@pytest.fixture(scope="module")
def native_server():
    import uvicorn

    from agentgym.integrations.openenv_server import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(_native_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_native_openenv_env_with_its_own_fields(native_server):
    env = gym.make("agentgym/OpenEnv-v0", base_url=native_server, action_field="guess", text_field="hint")
    try:
        obs, info = env.reset(seed=1)  # no task given: the server's default task with a drawn seed
        assert set(INFO_KEYS) <= set(info)
        obs, info = env.reset(options={"task": agentgym.TaskSpec("agentgym/OpenEnv-v0", {}, seed=1)})
        assert obs == "a fruit of 6 letters"
        obs, reward, terminated, truncated, info = env.step("apple")
        assert (obs, reward, terminated, info["success"], info["score"]) == ("no", 0.0, False, False, 0.0)
        no_anchor = info["anchor"]
        obs, reward, terminated, truncated, info = env.step("cherry")
        assert obs == "no" and info["anchor"] == no_anchor  # the fallback: a hash of the observation
        obs, reward, terminated, truncated, info = env.step("banana")
        assert (obs, reward, terminated, truncated) == ("yes!", 1.0, True, False)
        assert info["success"] is True and info["score"] == 1.0 and info["admissible_actions"] is None
        assert env.unwrapped.task_space.split_names == ()  # this server has no task API
    finally:
        env.close()


def test_native_env_without_text_field_shows_its_json(native_server):
    env = gym.make("agentgym/OpenEnv-v0", base_url=native_server, action_field="guess")
    try:
        obs, _ = env.reset(options={"task": agentgym.TaskSpec("agentgym/OpenEnv-v0", {}, seed=2)})
        assert obs == "a fruit of 6 letters"  # the only string field
        obs, *_ = env.step("cherry")
        assert obs == "yes!"
    finally:
        env.close()


def test_wrong_action_field_is_one_clear_error(native_server):
    env = gym.make("agentgym/OpenEnv-v0", base_url=native_server)  # sends {"action": ...}, the server wants "guess"
    try:
        env.reset(seed=0)
        with pytest.raises(agentgym.AgentGymError, match=r"OpenEnv server at .*Server error: Invalid message"):
            env.step("apple")
    finally:
        env.close()


@pytest.fixture(scope="module")
def packaged_echo_server(tmp_path_factory):
    """OpenEnv's own example env: `openenv init` writes the echo env as an installable package;
    it is installed (not editable) and served with the server module it ships."""
    import os
    import subprocess
    import sys

    import httpx

    from agentgym.integrations.openenv_server import free_port

    src = tmp_path_factory.mktemp("openenv_init")
    openenv_cli = [sys.executable, "-c", "from openenv.cli.__main__ import main; main()"]
    out = subprocess.run([*openenv_cli, "init", "echo_env", "--output-dir", str(src)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    site = tmp_path_factory.mktemp("echo_site")
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(src / "echo_env")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "echo_env.server.app", "--host", "127.0.0.1", "--port", str(port)],
                            env=dict(os.environ, PYTHONPATH=str(site)), cwd=str(site), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the packaged echo server exited"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.slow
def test_openenvs_packaged_echo_env(packaged_echo_server):
    env = gym.make("agentgym/OpenEnv-v0", base_url=packaged_echo_server, action_field="message",
                   text_field="echoed_message")
    try:
        obs, info = env.reset(seed=0)
        assert obs == "Echo Env environment ready!" and info["admissible_actions"] is None
        obs, reward, terminated, truncated, info = env.step("hello")
        assert (obs, reward, terminated, truncated) == ("hello", 0.5, False, False)
        first = info["anchor"]
        _, _, _, _, info = env.step("hello")
        assert info["anchor"] == first  # no state key from this server: a hash of the observation
        _, _, _, _, info = env.step("bye")
        assert info["anchor"] != first and info["action_valid"] is True and info["success"] is False
    finally:
        env.close()
