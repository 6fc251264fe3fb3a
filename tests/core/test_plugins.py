"""Third-party environments (and CLI commands) found through entry points, as Gymnasium plugins
are: a small package is built and installed here, then `import agentgym` registers its envs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PYPROJECT = """
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "agentgym-plugin-example"
version = "0.0.1"

[tool.setuptools]
py-modules = ["coinflip_envs"]

[project.entry-points."agentgym.envs"]
coinflip = "coinflip_envs:register"
table = "coinflip_envs:ENVS"
broken = "coinflip_envs:missing_function"

[project.entry-points."agentgym.commands"]
coinflip = "coinflip_envs:add_command"
"""

MODULE = '''
"""A third-party package's envs: a TextEnv of its own and the built-in Counter under new ids."""
import hashlib

from agentgym import TextEnv, TaskSpace, TaskSpec, register_env


class FlipSpace(TaskSpace):
    env_id = "coinflip/Flip-v0"

    def sample(self, rng, **_):
        return TaskSpec(self.env_id, {"side": ["heads", "tails"][int(rng.integers(2))]}, seed=0)

    def read_split(self, name):
        return (TaskSpec(self.env_id, {"side": "heads"}, seed=0), TaskSpec(self.env_id, {"side": "tails"}, seed=0))

    def solve(self, spec):
        return [f"call {spec.params['side']}"]


class FlipEnv(TextEnv):
    task_space = FlipSpace()

    def _info(self, valid, won):
        return {"task_id": self.task.task_id, "instruction": "call the coin", "admissible_actions":
                ["call heads", "call tails"], "anchor": hashlib.sha1(str(won).encode()).hexdigest()[:8],
                "action_valid": valid, "success": won, "score": float(won)}

    def _reset(self, task):
        return "A coin spins in the air.", self._info(True, False)

    def _step(self, action):
        valid = action in ("call heads", "call tails")
        won = action == f"call {self.task.params['side']}"
        return ("You win." if won else "You lose."), float(won), valid, False, self._info(valid, won)


def register():
    register_env("coinflip/Flip-v0", FlipEnv, max_episode_steps=3, description="call a coin")


ENVS = [dict(id="coinflip/Counter-v0", entry_point="agentgym.toy:CounterEnv", max_episode_steps=12,
             description="the built-in counter, registered by a plugin table")]


def add_command(app):
    @app.command("coinflip")
    def coinflip():
        """Say hello from a plugin."""
        print("coinflip command from a plugin")
'''

PROBE = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import agentgym
import gymnasium as gym
env = gym.make("coinflip/Flip-v0")
obs, info = env.reset(options={"task": env.unwrapped.task_space.split("train")[1]})
print(env.step("call tails")[1], env.step("call tails")[4]["success"])
print(sorted(i for i in agentgym.registered_envs() if i.startswith("coinflip/")))
print(gym.make("coinflip/Counter-v0").reset(seed=0)[0])
print([str(w.message) for w in caught if "plugin" in str(w.message)])
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    src = tmp_path_factory.mktemp("plugin_src")
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "coinflip_envs.py").write_text(MODULE)
    target = tmp_path_factory.mktemp("plugin_site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(src)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return target


def _run(plugin_path, *args):
    env = dict(os.environ, PYTHONPATH=str(plugin_path))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, env=env, cwd="/")


def test_import_agentgym_registers_a_plugins_envs(plugin_path):
    out = _run(plugin_path, "-c", PROBE)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "1.0 True"
    assert lines[1] == "['coinflip/Counter-v0', 'coinflip/Flip-v0']"
    assert lines[2] == "The counter shows 0."
    # the broken entry point: one warning naming it, and everything else still registered
    warning = eval(lines[3])  # noqa: S307 - our own probe's repr of a list of str
    assert len(warning) == 1 and "'broken'" in warning[0] and "agentgym-plugin-example" in warning[0]


def test_without_the_plugin_nothing_is_registered():
    out = subprocess.run([sys.executable, "-c", "import agentgym; print([i for i in agentgym.registered_envs() "
                          "if i.startswith('coinflip/')])"], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_plugin_cli_commands_and_envs_listing(plugin_path):
    out = _run(plugin_path, "-m", "agentgym.cli", "coinflip")
    assert out.returncode == 0 and "coinflip command from a plugin" in out.stdout, out.stderr[-2000:]
    out = _run(plugin_path, "-m", "agentgym.cli", "envs")
    assert "coinflip/Flip-v0" in out.stdout and "call a coin" in out.stdout


def test_our_own_commands_come_from_entry_points():
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group="agentgym.commands")}
    assert {"train", "eval", "tasks", "serve"} <= names
    out = subprocess.run([sys.executable, "-m", "agentgym.cli", "--help"], capture_output=True, text=True,
                         timeout=120)
    for command in ("train", "sft", "eval", "tasks", "serve", "envs", "rollout"):
        assert command in out.stdout
