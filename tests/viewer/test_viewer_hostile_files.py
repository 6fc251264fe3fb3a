"""Issue 52 item 11: a run folder holding a FIFO, a link to /dev/zero, an oversized file or a
huge line. Every request answers, quickly, with data or one line saying which file and why
(never a hang of every request, a bare 500 or a MemoryError); a slow file holds up only its
own request."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from agentgym.viewer import data as viewer_data  # noqa: E402
from agentgym.viewer.app import build_app, make_sources  # noqa: E402

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                                 reason="needs FIFOs and /dev/zero")]
GOOD = {"task_id": "t", "group_id": "g", "success": True, "score": 1.0,
        "steps": [{"observation": "o", "anchor": "a", "reward": 1.0, "action": "x", "action_valid": True}]}


def _run(tmp_path):
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    (run / "trajectories" / "iter0001.jsonl").write_text(json.dumps(GOOD) + "\n")
    os.mkfifo(run / "trajectories" / "iter0002.jsonl")
    os.symlink("/dev/zero", run / "trajectories" / "iter0003.jsonl")
    (run / "evals" / "iter0001").mkdir(parents=True)
    os.symlink("/dev/zero", run / "evals" / "iter0001" / "report.json")
    (run / "evals" / "iter0002").mkdir(parents=True)
    os.mkfifo(run / "evals" / "iter0002" / "trajectories.jsonl")
    os.mkfifo(run / "metrics.jsonl")
    os.symlink("/dev/zero", run / "config.yaml")
    (run / "report.json").write_text("[" * 200_000)
    return run


def test_fifos_and_devices_in_a_run_folder_are_skipped_and_every_request_answers(tmp_path):
    client = TestClient(build_app(make_sources([_run(tmp_path)])), base_url="http://127.0.0.1",
                        raise_server_exceptions=False)
    start = time.monotonic()
    summary = client.get("/api/s/0")
    assert summary.status_code == 200, summary.text[:300]
    files = summary.json()["files"]
    assert [f["label"] for f in files] == ["train iteration 1"]  # the FIFO and the /dev/zero link are not files
    assert not summary.json()["has_metrics"]
    assert client.get("/api/s/0/f/0").json()["episodes"] == 1
    assert client.get("/api/s/0/metrics").json() == []
    for i in range(len(summary.json()["reports"])):
        r = client.get(f"/api/s/0/r/{i}")
        assert r.status_code in (200, 404, 422, 500) and "error" in r.json() and "\n" not in r.json()["error"]
    assert time.monotonic() - start < 30


def test_a_path_that_is_a_fifo_or_device_is_refused_in_one_line(tmp_path):
    from agentgym.errors import ConfigError

    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        with pytest.raises(ConfigError, match="not a regular file"):
            make_sources([path])


def test_oversized_files_and_lines_are_one_line_errors_not_500(tmp_path, monkeypatch):
    monkeypatch.setattr(viewer_data, "MAX_FILE_BYTES", 4000)
    monkeypatch.setattr(viewer_data, "MAX_LINE_BYTES", 1000)
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    big = run / "trajectories" / "iter0001.jsonl"
    big.write_text((json.dumps(GOOD) + "\n") * 100)
    long_line = run / "trajectories" / "iter0002.jsonl"
    long_line.write_text(json.dumps(GOOD) + "\n" + json.dumps(dict(GOOD, pad="x" * 3000)) + "\n" + json.dumps(GOOD) + "\n")
    client = TestClient(build_app(make_sources([run])), base_url="http://127.0.0.1", raise_server_exceptions=False)
    r = client.get("/api/s/0/f/0")
    assert r.status_code == 422 and "over the viewer's" in r.json()["error"] and str(big) in r.json()["error"]
    r = client.get("/api/s/0/f/1")
    assert r.status_code == 200 and r.json()["episodes"] == 2 and r.json()["bad_lines"] == 1


def test_a_slow_file_holds_up_only_its_own_request(tmp_path, monkeypatch):
    """Handlers run in the thread pool: while one request parses (here: a parse made slow), the
    others are answered."""
    import uvicorn

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    original = viewer_data.EpisodeFile.__init__

    def slow(self, p):
        time.sleep(4)
        original(self, p)

    monkeypatch.setattr(viewer_data.EpisodeFile, "__init__", slow)
    import httpx

    app = build_app(make_sources([path]))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    slow_request = threading.Thread(target=lambda: httpx.get(base + "/api/s/0/f/0", timeout=30))
    slow_request.start()
    time.sleep(0.5)
    start = time.monotonic()
    assert httpx.get(base + "/api/sources", timeout=30).status_code == 200
    assert time.monotonic() - start < 2.0
    slow_request.join()
    server.should_exit = True
    thread.join(timeout=10)
