"""The viewer's data and API without a browser: what the trainer saves, what the server answers,
who may connect."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")

from agentgym.errors import ConfigError  # noqa: E402
from agentgym.trainers.estimators.common import FlatBatch  # noqa: E402
from agentgym.trainers.estimators.gigpo import anchor_groups  # noqa: E402
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages  # noqa: E402
from agentgym.trainers.records import should_save, train_path  # noqa: E402
from agentgym.trajectory import load_trajectories  # noqa: E402
from agentgym.hosts import check_host  # noqa: E402
from agentgym.viewer.app import build_app, make_sources  # noqa: E402
from agentgym.viewer.data import EpisodeFile  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from runfixture import load_lines, make_run  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("viewer"))


@pytest.fixture(scope="module")
def client(run):
    from starlette.testclient import TestClient

    return TestClient(build_app(make_sources([run])), base_url="http://127.0.0.1")


def test_saved_advantages_are_the_trained_ones_with_gigpo_parts(run):
    trajs = load_trajectories(train_path(run, 5))
    est = EstimatorConfig(name="gigpo", gamma=0.9, omega=1.0, norm_std=True)
    expected = compute_advantages(trajs, est)  # recomputed from the saved episodes
    for traj, adv in zip(trajs, expected):
        saved = traj.metadata["advantage"]
        np.testing.assert_allclose(saved["total"], adv, atol=1e-6)
        # GiGPO's two parts add up to what the step trained on (no invalid_no_credit clipping here)
        np.testing.assert_allclose(np.add(saved["episode"], saved["step"]), adv, atol=1e-5)
        assert len(traj.metadata["tokens"]) == len(traj.steps)
        assert "".join(traj.metadata["tokens"][0]) == traj.steps[0].text
    assert any(np.any(np.abs(t.metadata["advantage"]["step"]) > 1e-6) for t in trajs)  # step part does something
    assert trajs[-1].infra_error and not any(trajs[-1].metadata["advantage"]["total"])


def test_which_iterations_are_saved():
    assert [k for k in range(1, 13) if should_save(5, k)] == [1, 5, 10]
    assert not any(should_save(0, k) for k in range(1, 10))


def test_trainer_hooks_write_into_the_run_dir(run, tmp_path):
    from agentgym.trainers.config import TrainConfig
    from agentgym.evaluation.evaluate import compute_metrics
    from agentgym.trainers.records import save_evaluation, save_iteration

    trajs = load_trajectories(train_path(run, 5))
    est = EstimatorConfig(name="grpo")
    adv = compute_advantages(trajs, est)
    cfg = TrainConfig(run_dir=str(tmp_path))
    cfg.log.save_trajectories_every = 2
    assert save_iteration(cfg.log, cfg.run_dir, 2, trajs, adv, est) is None  # iteration 3: not kept
    path = save_iteration(cfg.log, cfg.run_dir, 3, trajs, adv, est)  # iteration 4
    assert path == train_path(tmp_path, 4)
    saved = load_trajectories(path)
    assert saved[0].metadata["iteration"] == 4 and saved[0].metadata["estimator"] == "grpo"
    assert saved[0].metadata["advantage"]["episode"] == saved[0].metadata["advantage"]["total"]
    assert "advantage" not in trajs[0].metadata or trajs[0].metadata["estimator"] == "gigpo"  # originals untouched
    out = save_evaluation(cfg.log, cfg.run_dir, compute_metrics(trajs[:4], env_id="agentgym/Household-v0"), iteration=4)
    assert (out / "report.json").is_file() and len(load_trajectories(out / "trajectories.jsonl")) == 4
    cfg.log.save_trajectories_every = 0
    assert save_evaluation(cfg.log, cfg.run_dir, compute_metrics(trajs[:4]), iteration=6) is None


def test_anchor_groups_are_gigpos(run):
    """The viewer's anchor groups partition the steps exactly as GiGPO's estimator does."""
    path = train_path(run, 5)
    viewer = EpisodeFile(path)
    trajs = load_trajectories(path)
    ids, _ = anchor_groups(FlatBatch.build(trajs, EstimatorConfig(name="gigpo")))
    flat = [(i, t) for i, traj in enumerate(trajs) for t in range(len(traj.steps))]
    ours = [viewer.anchor_of[key] for key in flat]
    pairs = set(zip(ids.tolist(), ours))
    assert len(pairs) == len(set(ids.tolist())) == len(set(ours))  # a bijection between the two labelings
    assert any(len(m) > 1 for m in viewer.members)


def test_api_serves_the_run(client, run):
    summary = client.get("/api/s/0").json()
    assert [f["label"] for f in summary["files"]] == ["train iteration 5", "eval iteration 0", "eval iteration 10"]
    assert summary["estimator"] == "gigpo" and summary["has_metrics"]
    assert len(summary["reports"]) == 2
    episodes = load_lines(train_path(run, 5))
    ep = client.get("/api/s/0/f/0/e/1").json()
    assert [s["advantage"]["total"] for s in ep["steps"]] == episodes[1]["metadata"]["advantage"]["total"]
    assert [s["observation"] for s in ep["steps"]] == [s["observation"] for s in episodes[1]["steps"]]
    overview = client.get("/api/s/0/f/0").json()
    assert sum(len(g["episodes"]) for g in overview["groups"]) == len(episodes)
    metrics = client.get("/api/s/0/metrics").json()
    assert [m["step"] for m in metrics if "rollout/success_rate" in m] == list(range(1, 11))
    report = client.get("/api/s/0/r/1").json()
    assert report["overall"]["success_rate"]["value"] == 1.0
    assert client.get("/api/s/0/f/9").status_code == 404
    assert client.get("/api/s/3").status_code == 404
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/viewer.js").headers["content-security-policy"]


def test_nan_in_a_file_becomes_null(tmp_path):
    from starlette.testclient import TestClient

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"task_id": "t", "group_id": "g", "score": float("nan"),
                                "steps": [{"observation": "o", "anchor": "a", "reward": float("inf")}]}) + "\n{torn")
    client = TestClient(build_app(make_sources([path])), base_url="http://127.0.0.1")
    ep = client.get("/api/s/0/f/0/e/0").json()
    assert ep["score"] is None and ep["steps"][0]["reward"] is None
    assert client.get("/api/s/0/f/0").json()["bad_lines"] == 1


def test_loopback_only_unless_asked(client):
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.com"):
        with pytest.raises(ConfigError, match="--allow-remote"):
            check_host(host, False, "viewer")
        check_host(host, True, "viewer")
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_host(host, False, "viewer")
    # a DNS-rebinding page reaches the loopback server under a foreign Host name: refused
    assert client.get("/api/s/0", headers={"host": "attacker.example"}).status_code == 400


def test_view_command_refuses_a_public_bind(run):
    out = subprocess.run([sys.executable, "-m", "agentgym.cli", "view", str(run), "--host", "0.0.0.0", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "--allow-remote" in out.stderr and "Traceback" not in out.stderr


def test_view_command_refuses_a_missing_path(tmp_path):
    out = subprocess.run([sys.executable, "-m", "agentgym.cli", "view", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_view_command_serves_on_loopback(run):
    import re
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "agentgym.cli", "view", str(run), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # "agentgym view: http://127.0.0.1:PORT/  (Ctrl-C to stop)"
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        with urllib.request.urlopen(match.group(0) + "api/sources", timeout=30) as resp:
            assert json.loads(resp.read())[0]["name"] == run.name
        with urllib.request.urlopen(match.group(0), timeout=30) as resp:
            page = resp.read().decode()
        assert '<script src="/static/viewer.js"' in page and "://" not in page  # nothing from elsewhere: offline
    finally:
        proc.terminate()
        proc.wait(timeout=30)
