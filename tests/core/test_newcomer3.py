"""A newcomer's first hour, round three (issue 69): a command run without the extra it needs says
in one line what to install (item 6), and the project's own tests use the current TaskSpace API
(item 8).

The missing extra is simulated in a fresh interpreter whose import system refuses the extra's
package (a meta-path finder raising ModuleNotFoundError, as Python does for a package that is not
installed), then runs the `agentgym` command line as the console script does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.errors import install_hint

ROOT = Path(__file__).resolve().parents[2]

WITHOUT = '''
import importlib.abc, os, sys
BLOCKED = set(os.environ["AGENTGYM_TEST_NOT_INSTALLED"].split(","))
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NotInstalled())
sys.argv = ["agentgym", *sys.argv[1:]]
from agentgym.cli import main
main()
'''

# (command, the packages missing, the extra it must name)
COMMANDS = [
    (["train", "household-tiny"], "torch", "train"),
    (["sft", "household-tiny"], "torch", "train"),
    (["eval", "agentgym/Household-v0", "--policy", "hf:{model}", "--episodes", "1"], "torch", "train"),
    (["gateway", "--train", "household-tiny"], "torch", "train"),
    (["train", "household-tiny", "policy.engine=vllm"], "vllm", "vllm"),
    (["train", "household-tiny", "env.executor=ray"], "ray", "ray"),
    (["serve", "agentgym/Household-v0"], "openenv", "openenv"),
    (["view", "{runs}"], "starlette,uvicorn", "web"),
    (["eval", "agentgym/Household-v0", "--policy", "openai:http://127.0.0.1:9/v1:m", "--episodes", "1"],
     "openai,httpx", "openai"),
]


@pytest.mark.parametrize("command,missing,extra", COMMANDS, ids=[" ".join(c[0][:2]) + f" without {c[1]}" for c in COMMANDS])
def test_newcomer3_a_command_without_its_extra_is_one_line_naming_it(tmp_path, command, missing, extra):
    """Issue 69, item 6: without the train extra, `agentgym train household-tiny` printed a 25-line
    traceback ending in ModuleNotFoundError: No module named 'torch'; each command that needs an
    extra says in one line which `pip install 'agentgym-credit[...]'` it needs."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    script = tmp_path / "without.py"
    script.write_text(WITHOUT)
    args = [a.format(model=model, runs=tmp_path) for a in command]
    env = {**os.environ, "AGENTGYM_TEST_NOT_INSTALLED": missing, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error:") and install_hint(extra) in lines[0], done.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything was built


def test_newcomer3_the_tests_use_the_current_task_space_api():
    """Issue 69, item 8: the project's own tests called the deprecated TaskSpace.heldout_keys() and
    fresh_tasks() (3 of the suite's 48 warnings); they use the current API."""
    # the methods' calls (space.heldout_keys(), space.fresh_tasks(n, ...)), not the functions that replace them
    # (validation.heldout_keys(space), generation.fresh_tasks(space, n, ...))
    deprecated = re.compile(r"\.heldout_keys\(\)|(?<!generation)\.fresh_tasks\(")
    callers = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
               if p.name != Path(__file__).name and deprecated.search(p.read_text(encoding="utf-8"))]
    assert callers == [], callers
