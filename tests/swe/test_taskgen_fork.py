"""Task generation's forked test runs (envs/swe/taskgen.fork_pytest): the child's memory cap
counts from the parent's own size, so a parent past 1 GiB (torch and a model loaded, as in a
training run that generates tasks) still validates them, and a test that grows without bound
still fails alone."""

from __future__ import annotations

import mmap
import textwrap

import pytest

from agentgym.envs.swe.repos import HIDDEN_TESTS, VISIBLE_TESTS
from agentgym.envs.swe.taskgen import CHILD_MEMORY_BYTES, _address_space_bytes, fork_pytest

if _address_space_bytes() is None:
    pytest.skip("the cap counts from /proc/self/statm", allow_module_level=True)


def _project(root, hidden_test: str):
    (root / VISIBLE_TESTS).mkdir(parents=True)
    (root / HIDDEN_TESTS).mkdir()
    (root / VISIBLE_TESTS / "test_small.py").write_text("def test_small():\n    assert bytearray(1 << 20)\n")
    (root / HIDDEN_TESTS / "test_hidden.py").write_text(textwrap.dedent(hidden_test))
    return root


def test_a_parent_past_one_gib_still_runs_the_projects_tests(tmp_path):
    ws = _project(tmp_path, "def test_hidden():\n    assert bytearray(64 << 20)\n")
    # reserved, never touched: the address space grows, the memory in use does not
    reserve = mmap.mmap(-1, (1 << 30) + (256 << 20))
    try:
        assert _address_space_bytes() > 1 << 30
        report = fork_pytest(ws)
    finally:
        reserve.close()
    assert report.complete and report.outcomes and not report.failing(), report.outcomes


def test_a_test_that_grows_past_the_cap_fails_alone(tmp_path):
    ws = _project(tmp_path, f"""\
        def test_hidden():
            hoard = bytearray({CHILD_MEMORY_BYTES + (256 << 20)})
        """)
    report = fork_pytest(ws)
    assert report.complete
    assert report.failing() == [f"{HIDDEN_TESTS}/test_hidden.py::test_hidden"], report.outcomes
