"""Issue 19: what a hostile tester broke in SWE-v0 (grader hacks, host file read/write, dangling
links, NUL bytes, huge numbers, leaked folders). Each test failed on the code before the fix."""

import json
import os
import tempfile
from pathlib import Path

import pytest

import agentgym  # noqa: F401
from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.testing import prepare_grading_copy
from agentgym.tasks import validation as _validation
from agentgym.tasks.generator import TaskGenerator
from agentgym.tasks.pool import TaskPool
from agentgym.tasks.spec import TaskSpec

SPACE = SWETaskSpace()
TASK = SPACE.split("train")[0]
PKG = TASK.params["repo"]

FORGED_REPORTER = '''
import json, os, sys
def pytest_unconfigure(config):
    nonce = os.environ.get("AGENTGYM_REPORT_NONCE", "")
    ids = json.load(open(os.path.join(os.getcwd(), ".ids")))
    sys.__stdout__.write("\\n@@REPORT-%s@@" % nonce + json.dumps({i: {"outcome": "passed"} for i in ids}) + "@@END-%s@@\\n" % nonce)
'''

ATEXIT_FORGERY = '''
import atexit as _a, json as _j, os as _o, sys as _s
def _forge():
    n = _o.environ.get("AGENTGYM_REPORT_NONCE", "")
    ids = _j.load(open(_o.path.join(_o.getcwd(), ".ids")))
    _s.__stdout__.write("\\n@@REPORT-%s@@" % n + _j.dumps({i: {"outcome": "passed"} for i in ids}) + "@@END-%s@@\\n" % n)
    _s.__stdout__.flush()
    try:
        import agentgym_report
        for k in ids:
            agentgym_report._results[k] = {"outcome": "passed", "message": ""}
    except Exception:
        pass
_a.register(_forge)
'''


def _env(backend):
    if backend == "bwrap":
        from agentgym.envs.swe.sandbox_bwrap import bwrap_works

        if not bwrap_works():
            pytest.skip("bwrap cannot run here")
    return SWEEnv(backend=backend)


def _submit(env):
    obs, reward, terminated, truncated, info = env.step("submit")
    return obs, reward, terminated, info


@pytest.mark.parametrize("backend", ["bwrap", "local"])
@pytest.mark.parametrize("attack", ["shadow_reporter", "shadow_pytest", "atexit_forgery"])
def test_grader_cannot_be_hacked_without_a_fix(backend, attack):
    env = _env(backend)
    try:
        env.reset(options={"task": TASK})
        ws = env.workspace
        ids = list(TASK.params["FAIL_TO_PASS"]) + list(TASK.params["PASS_TO_PASS"])
        (ws / ".ids").write_text(json.dumps(ids))
        if attack == "shadow_reporter":
            (ws / "agentgym_report.py").write_text(FORGED_REPORTER)
            (ws / "agentgym_grade.py").write_text("import os; os.write(1, b'hi')\n")
        elif attack == "shadow_pytest":
            (ws / "pytest.py").write_text(FORGED_REPORTER + "\ndef main(*a, **k):\n    pytest_unconfigure(None)\n")
        else:
            init = ws / PKG / "__init__.py"
            init.write_text(init.read_text() + ATEXIT_FORGERY)
        env.sandbox.workspace_changed()
        obs, reward, terminated, info = _submit(env)
        assert terminated and not info["success"] and reward == 0.0, obs
    finally:
        env.close()


def test_oracle_still_solves_on_local_backend():
    env = SWEEnv(backend="local")
    try:
        env.reset(options={"task": TASK})
        for a in SPACE.solve(TASK):
            obs, reward, terminated, truncated, info = env.step(a)
        assert info["success"] and reward == 1.0, obs
    finally:
        env.close()


def test_grading_copy_has_no_links_and_reads_no_host_file(tmp_path):
    secret_dir = Path(tempfile.mkdtemp(prefix="hostile-secret-"))
    secret = secret_dir / "secret.txt"
    secret.write_text("HOST SECRET")
    ws = tmp_path / "agent" / "ws"
    ws.mkdir(parents=True)
    (ws / PKG).mkdir()
    (ws / PKG / "__init__.py").write_text("")
    pc = ws / "__pycache__"
    (pc / "a").mkdir(parents=True)
    os.symlink("../..", pc / "a" / "l")
    os.symlink("a/l/..", pc / "u1")
    os.symlink("u1/..", pc / "u2")
    rel = os.path.relpath(secret, "/")
    os.symlink(f"__pycache__/u2/{'../' * 8}{rel}", ws / "leak")
    os.symlink(str(secret_dir), ws / "leakdir")
    os.symlink("does-not-exist", ws / "dangling")
    root = tmp_path / "grade"
    root.mkdir()
    try:
        out = prepare_grading_copy(PKG, ws, root)
        for dirpath, dirnames, filenames in os.walk(out):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                assert not p.is_symlink(), p
                if p.is_file():
                    assert b"HOST SECRET" not in p.read_bytes(), p
        # the tests never come from (or go into) the agent's copy: they are a read-only suite of their own
        assert not (out / "hidden_tests").exists() and not (out / "tests").exists()
    finally:
        secret.unlink()
        secret_dir.rmdir()


def test_sync_back_drops_link_chains_leading_out(tmp_path):
    import io
    import tarfile

    from agentgym.envs.swe.workspace import replace_from_tar

    ws = tmp_path / "ws"
    ws.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("__pycache__", "__pycache__/a"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, target in (("__pycache__/a/l", "../.."), ("__pycache__/u1", "a/l/.."), ("__pycache__/u2", "u1/..")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    replace_from_tar(ws, buf.getvalue())
    for dirpath, dirnames, filenames in os.walk(ws):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                real = os.path.realpath(p)
                assert real == str(ws.resolve()) or real.startswith(str(ws.resolve()) + os.sep), (p, real)


def _swe_folders() -> set[str]:
    """This process's workspace folders (other processes on the machine make their own)."""
    mine = f"agentgym-swe-{os.getpid()}."
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(mine)}


def test_dangling_link_submit_ends_cleanly_and_leaves_no_folder():
    env = SWEEnv(backend="local", max_steps=3)
    try:
        env.reset(options={"task": TASK})
        os.symlink("nowhere/at/all", env.workspace / "dangling")
        os.symlink("../../../../../../etc", env.workspace / "etc_link")
        before = _swe_folders()
        obs, reward, terminated, info = _submit(env)
        assert terminated and reward == 0.0 and "Not solved" in obs
        assert _swe_folders() <= before
    finally:
        env.close()


def test_failed_grade_leaves_no_temp_folder(monkeypatch):
    from agentgym.envs.swe import testing

    def boom(*a, **k):
        raise OSError("disk on fire")

    monkeypatch.setattr(testing, "make_sandbox", boom)
    before = _swe_folders()
    with pytest.raises(OSError):
        testing.grade(dict(TASK.params), testing.repo_path(PKG))
    assert _swe_folders() <= before


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("action", [
    json.dumps({"name": "bash", "arguments": {"command": "echo a\x00b"}}),
    "bash echo a\x00b",
    json.dumps({"name": "run_tests", "arguments": {"paths": ["tests\x00x"]}}),
    json.dumps({"name": "view", "arguments": {"path": "README.md\x00"}}),
    "view README.md " + "9" * 5000,
    "view README.md 1-" + "9" * 5000,
    "bash --timeout " + "9" * 5000 + " ls",
    json.dumps({"name": "bash", "arguments": {"command": "ls", "timeout": "nan"}}),
    '{"name": "view", "arguments": {"path": "README.md", "start_line": ' + "9" * 5000 + "}}",
])
def test_nul_bytes_and_huge_numbers_are_invalid_actions_without_fd_leaks(action):
    env = SWEEnv(backend="local", max_steps=50)
    try:
        env.reset(options={"task": TASK})
        env.step("bash true")
        fds = _open_fds()
        for _ in range(5):
            obs, reward, terminated, truncated, info = env.step(action)
            assert not terminated
        assert _open_fds() <= fds
        assert info["action_valid"] is False or "timeout" in action, obs
    finally:
        env.close()


def test_llm_proposal_with_a_path_is_refused_before_any_file_is_written(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    rel = os.path.relpath(victim, tempfile.gettempdir() + "/agentgym-swe-x/ws")
    params = dict(TASK.params, file=rel, before="untouched", after="PWNED")
    gen = TaskGenerator(SPACE, TaskPool(), seed=0)
    reason = gen.admit(TaskSpec(SPACE.env_id, params, seed=0), "llm")
    assert reason == "invalid"
    assert victim.read_text() == "untouched"
    with pytest.raises(agentgym.errors.TaskParamError):
        env = SWEEnv(backend="local")
        try:
            env.reset(options={"task": TaskSpec(SPACE.env_id, params, seed=0)})
        finally:
            env.close()
    assert victim.read_text() == "untouched"


def test_swe_proposals_for_unseen_projects_are_refused():
    gen = TaskGenerator(SPACE, TaskPool(), seed=0)
    for task in SPACE.split("heldout_unseen")[:9]:
        relabelled = TaskSpec(SPACE.env_id, dict(task.params), seed=task.seed + 12345)
        assert gen.admit(relabelled, "llm") == "reserved"
    assert not any(_validation.is_reserved(SPACE, t) for t in SPACE.split("train"))
