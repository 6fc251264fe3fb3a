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


def test_null_and_nan_advantages_are_shown_not_summed(tmp_path):
    """A step advantage of null (or NaN) is allowed by the reader; the episode's mean advantage
    is taken over the steps that have one (summing the null was an HTTP 500)."""
    path = tmp_path / "t.jsonl"
    eps = []
    for total in ([None, 0.5], [None], [float("nan"), 1.5]):
        ep = json.loads(json.dumps(GOOD))
        ep["steps"] = ep["steps"] * len(total)
        ep["metadata"]["advantage"] = {"total": total}
        eps.append(json.dumps(ep))
    path.write_text("\n".join(eps) + "\n")
    client = TestClient(build_app(make_sources([path])), base_url="http://127.0.0.1", raise_server_exceptions=False)
    overview = client.get("/api/s/0/f/0")
    assert overview.status_code == 200, overview.text[:300]
    means = [e["mean_adv"] for g in overview.json()["groups"] for e in g["episodes"]]
    assert means == [0.5, None, 1.5]
    for i in range(3):
        assert client.get(f"/api/s/0/f/0/e/{i}").status_code == 200


def test_a_run_with_malformed_metrics_and_reports_is_shown(tmp_path):
    """metrics.jsonl lines that are not JSON objects (nested past the parser, lists, numbers, not
    UTF-8) are skipped and a report.json that is not an object is an error reply, not a bare 500."""
    run = tmp_path / "run"
    (run / "evals" / "iter_000001").mkdir(parents=True)
    lines = [b'{"iteration": 1, "a": 1}', b"[1, 2]", b"42", b"{torn", b"[" * 100_000 + b"]" * 100_000,
             b'{"iteration": 2, "a": "\xff"}', b'{"iteration": 3, "a": 3}']
    (run / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (run / "evals" / "iter_000001" / "report.json").write_text("[1, 2]")
    client = TestClient(build_app(make_sources([run])), base_url="http://127.0.0.1", raise_server_exceptions=False)
    metrics = client.get("/api/s/0/metrics")
    assert metrics.status_code == 200, metrics.text[:300]
    assert [m["iteration"] for m in metrics.json()] == [1, 2, 3]
    report = client.get("/api/s/0/r/0")
    assert report.headers["content-type"].startswith("application/json") and "not a JSON object" in report.json()["error"]
