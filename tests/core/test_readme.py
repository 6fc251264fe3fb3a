"""Every ```python block of the README runs verbatim as a script, without a traceback: a user who
copies one into a file gets what the README says."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs_as_a_script(code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    first = code.strip().splitlines()[0]
    assert proc.returncode == 0, f"README block starting {first!r} failed:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, f"README block starting {first!r} printed a traceback:\n{proc.stderr[-3000:]}"


def test_the_readme_reads_in_five_minutes():
    """Issue 51: what it is, install and run, envs, training, evaluation, headline figures; the
    experiments and their history live in docs/results.md."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_environment_table_names_every_registered_id():
    """Issue 69, item 8: `agentgym envs` listed agentgym/OpenEnv-v0, the README's table did not."""
    # the ids `import agentgym` registers, in a fresh interpreter (tests register toys of their own)
    listed = subprocess.run([sys.executable, "-c", "import gymnasium as gym, agentgym; "
                             "print('\\n'.join(k for k in gym.registry if k.startswith('agentgym/')))"],
                            capture_output=True, text=True, check=True, timeout=120).stdout.split()
    table = README.read_text(encoding="utf-8").split("## Environments", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(agentgym/[\w-]+)`", table))
    for braces in re.findall(r"`agentgym/([\w-]*)\{([^}]*)\}([\w-]*)`", table):  # TextWorld-{A,B}-v0
        named |= {f"agentgym/{braces[0]}{part}{braces[2]}" for part in braces[1].split(",")}
    registered = set(listed)
    assert registered - named == set(), f"in the registry but not the README's table: {sorted(registered - named)}"
