import pytest

from agentgym.envs.tools.env import ToolUseEnv
from agentgym.envs.tools.tasks import ToolUseTaskSpace
from agentgym.tasks.spec import TaskSpec


@pytest.fixture(scope="session")
def space():
    return ToolUseTaskSpace()


@pytest.fixture
def env():
    e = ToolUseEnv()
    yield e
    e.close()


@pytest.fixture
def spec():
    def make(template: str, level: int = 2, seed: int = 0) -> TaskSpec:
        return TaskSpec("agentgym/ToolUse-v0", {"template": template, "level": level}, seed=seed)

    return make
