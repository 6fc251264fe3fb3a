"""Issue 38: a trajectory file with malformed lines (JSON of the wrong shapes, nesting too deep
for the parser) is shown with those lines counted as unreadable, never an HTTP 500."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from agentgym.viewer.app import build_app, make_sources  # noqa: E402

GOOD = {"task_id": "t", "group_id": "g", "success": True, "score": 1.0,
        "steps": [{"observation": "o", "anchor": "a", "reward": 1.0, "action": "x", "action_valid": True}],
        "metadata": {"advantage": {"total": [0.5]}}}
MALFORMED = [
    {"task_id": "t", "group_id": "g", "steps": 5},
    {"task_id": "t", "group_id": "g", "steps": "abc"},
    {"task_id": "t", "group_id": "g", "steps": [1, 2]},
    {"task_id": "t", "group_id": "g", "steps": [], "metadata": "x"},
    {"task_id": "t", "group_id": "g", "steps": [{"observation": "o"}], "metadata": {"advantage": {"total": "ab"}}},
    {"task_id": "t", "group_id": "g", "steps": [{"observation": "o"}], "metadata": {"advantage": [1]}},
    {"task_id": "t", "group_id": "g", "steps": [{"observation": "o"}], "metadata": {"tokens": 7}},
    [1, 2, 3],
    42,
]


def test_malformed_lines_are_counted_and_the_rest_is_shown(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(GOOD)] + [json.dumps(m) for m in MALFORMED] + ["[" * 100_000 + "]" * 100_000,
                                                                      json.dumps(GOOD)]
    path.write_text("\n".join(lines) + "\n")
    client = TestClient(build_app(make_sources([path])), base_url="http://127.0.0.1", raise_server_exceptions=False)
    overview = client.get("/api/s/0/f/0")
    assert overview.status_code == 200, overview.text[:300]
    body = overview.json()
    assert body["episodes"] == 2 and body["bad_lines"] == len(MALFORMED) + 1
    for i in range(2):
        ep = client.get(f"/api/s/0/f/0/e/{i}")
        assert ep.status_code == 200 and ep.json()["steps"][0]["advantage"] == {"total": 0.5}
