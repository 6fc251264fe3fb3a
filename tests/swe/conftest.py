import functools
import os
import shutil

import pytest


@functools.lru_cache(maxsize=1)
def _bwrap_ok() -> bool:
    from agentgym.envs.swe.sandbox_bwrap import bwrap_works

    return bwrap_works()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="bubblewrap (bwrap) is not installed or cannot create namespaces here")
    for item in items:
        if "sandbox" in item.keywords and not _bwrap_ok():
            item.add_marker(skip)


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pkg").mkdir()
    (ws / "pkg" / "mod.py").write_text("def add(a, b):\n    return a + b\n")
    os.chmod(tmp_path, 0o755)
    yield ws
    shutil.rmtree(ws, ignore_errors=True)
