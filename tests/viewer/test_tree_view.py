"""Tree rollouts in the viewer: a branched collection is shown as a tree, each branch listed under its
parent episode and hanging off the parent's step it starts from, with its return and its steps."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

import agentgym  # noqa: E402
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages  # noqa: E402
from agentgym.trainers.records import annotate  # noqa: E402
from agentgym.trajectory import save_trajectories  # noqa: E402
from agentgym.viewer.app import build_app, make_server, make_sources  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from runfixture import ENV, MixedPolicy  # noqa: E402


@pytest.fixture(scope="module")
def tree_file(tmp_path_factory) -> Path:
    """One task, two root episodes (the oracle's and a random walk), two branches at steps 0, 3, 6,
    with the tree estimator's advantages, saved as the trainer saves an iteration."""
    space = agentgym.get_task_space(ENV)
    policy = MixedPolicy(space)
    trajs = agentgym.collect(ENV, space.split("train")[:1], policy, 2, seed=3, session=None,
                             branch={"k": 2, "every": 3}, env_kwargs={"max_episode_steps": 8})
    est = EstimatorConfig(name="tree", gamma=0.9)
    annotate(trajs, iteration=1, advantages=compute_advantages(trajs, est), est_cfg=est)
    path = tmp_path_factory.mktemp("tree") / "tree.jsonl"
    save_trajectories(path, trajs)
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _expected(episodes: list[dict]) -> dict[int, list[tuple[int, int]]]:
    """parent index -> [(branch step, branch index)] in step order, from the file's tree records."""
    index = {ep["metadata"]["tree"]["id"]: i for i, ep in enumerate(episodes)}
    out: dict[int, list[tuple[int, int]]] = {}
    for i, ep in enumerate(episodes):
        tree = ep["metadata"]["tree"]
        if tree["parent"] is not None:
            out.setdefault(index[tree["parent"]], []).append((tree["step"], i))
    return {p: sorted(v) for p, v in out.items()}


def test_the_api_serves_each_episode_with_its_branches_under_their_steps(tree_file):
    episodes = _lines(tree_file)
    expected = _expected(episodes)
    roots = [i for i, ep in enumerate(episodes) if ep["metadata"]["tree"]["parent"] is None]
    assert len(roots) == 2 and all(len(expected[r]) == 2 * len(range(0, len(episodes[r]["steps"]), 3)) for r in roots)
    client = TestClient(build_app(make_sources([tree_file])), base_url="http://127.0.0.1")

    # the file's rows: each root, then its branches by branch step (depth 1)
    (group,) = client.get("/api/s/0/f/0").json()["groups"]
    rows = [(e["index"], e["depth"], e["branch_step"]) for e in group["episodes"]]
    assert rows == [row for r in roots for row in [(r, 0, None)] + [(b, 1, s) for s, b in expected[r]]]

    for r in roots:
        ep = client.get(f"/api/s/0/f/0/e/{r}").json()
        points = ep["branch_points"]
        assert [p["step"] for p in points] == sorted({s for s, _ in expected[r]})
        for p in points:
            assert p["t"] == p["step"]  # a root's steps are numbered from 0
            assert [b["index"] for b in p["branches"]] == [b for s, b in expected[r] if s == p["step"]]
            root_rest = sum(s["reward"] for s in episodes[r]["steps"][p["step"]:])
            assert p["return_from_here"] == pytest.approx(root_rest)
            for b in p["branches"]:
                steps = episodes[b["index"]]["steps"]
                assert b["return"] == pytest.approx(sum(s["reward"] for s in steps))
                assert [(s["turn"], s["action"], s["reward"]) for s in b["steps"]] == \
                    [(p["step"] + u, s["action"], s["reward"]) for u, s in enumerate(steps)]
                assert [s["advantage"] for s in b["steps"]] == \
                    pytest.approx(episodes[b["index"]]["metadata"]["advantage"]["total"])
            assert p["mean_return"] == pytest.approx(sum(b["return"] for b in p["branches"]) / len(p["branches"]))

    # a branch knows its parent, and its steps are numbered from its branch step
    step, b = expected[roots[0]][-1]
    branch = client.get(f"/api/s/0/f/0/e/{b}").json()
    assert (branch["parent"], branch["branch_step"], branch["branch_points"]) == (roots[0], step, [])
    assert [s["turn"] for s in branch["steps"]] == list(range(step, step + len(branch["steps"])))


def test_malformed_tree_records_leave_plain_episodes(tmp_path):
    ep = {"task_id": "t", "group_id": "g", "steps": [{"action": "look", "reward": 0.0}]}
    lines = [{**ep, "metadata": {"tree": {"id": "g#0", "parent": None, "step": 0}}},
             {**ep, "metadata": {"tree": {"id": "g#1", "parent": "g#0", "step": "2"}}},  # a step that is no number
             {**ep, "metadata": {"tree": {"id": "g#2", "parent": "g#9", "step": 1}}},  # a parent not in the file
             {**ep, "metadata": {"tree": {"id": "g#3", "parent": "g#4", "step": 0}}},  # a cycle
             {**ep, "metadata": {"tree": {"id": "g#4", "parent": "g#3", "step": 0}}},
             {**ep, "metadata": {"tree": "root"}}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    client = TestClient(build_app(make_sources([path])), base_url="http://127.0.0.1")
    data = client.get("/api/s/0/f/0").json()
    assert data["bad_lines"] == 0
    rows = [(e["index"], e["parent"], e["branch_step"]) for e in data["groups"][0]["episodes"]]
    assert sorted(rows) == [(0, None, None), (1, None, None), (2, None, 1), (3, 4, 0), (4, 3, 0), (5, None, None)]
    assert client.get("/api/s/0/f/0/e/2").json()["steps"][0]["turn"] == 1



@pytest.mark.browser
@pytest.mark.timeout(180)
def test_the_page_shows_the_tree(tree_file):
    pytest.importorskip("playwright")
    from agentgym.envs.webshop.browser import CHROMIUM_ARGS, chromium_path

    if not os.path.exists(chromium_path()):
        pytest.skip("needs Debian's chromium")
    from playwright.sync_api import sync_playwright

    episodes = _lines(tree_file)
    expected = _expected(episodes)
    root = next(i for i, ep in enumerate(episodes) if ep["metadata"]["tree"]["parent"] is None)
    server, sock, url = make_server([tree_file], port=0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.02)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            # the episode: each branch point right after the card of the step it starts from
            page.goto(url + f"#/s/0/f/0/e/{root}")
            page.wait_for_selector("[data-testid=branch-point]")
            children = page.eval_on_selector_all(
                "[data-testid=steps] > *", "els => els.map(e => [e.dataset.testid || '', e.dataset.step || ''])")
            for step in sorted({s for s, _ in expected[root]}):
                k = children.index(["step", str(step)])
                assert children[k + 1] == ["branch-point", str(step)]
            shown = page.eval_on_selector_all("[data-testid=branch]", "els => els.map(e => [+e.dataset.episode, "
                                              "e.querySelector('[data-testid=return]').textContent, "
                                              "[...e.querySelectorAll('[data-testid=branch-step]')].map(r => +r.dataset.turn)])")
            assert shown == [[b, f"{sum(s['reward'] for s in episodes[b]['steps']):.3f}",
                              list(range(s, s + len(episodes[b]["steps"])))] for s, b in expected[root]]

            # a branch's page: where it hangs, and its steps numbered from there
            step, b = expected[root][-1]
            page.locator(f"[data-testid=branch][data-episode='{b}'] a").first.click()
            page.wait_for_selector("[data-testid=branch-of]")
            assert page.locator("[data-testid=branch-of]").inner_text().startswith(f"branch from t={step} of episode {root}")
            assert page.locator("[data-testid=step] .t").first.inner_text() == f"t={step}"

            # the file: branches indented under their parent
            page.goto(url + "#/s/0/f/0")
            page.wait_for_selector("[data-testid=episode-row]")
            rows = page.eval_on_selector_all("[data-testid=episode-row]",
                                             "els => els.map(e => [+e.dataset.episode, +e.dataset.depth])")
            assert rows[: 1 + len(expected[root])] == [[root, 0]] + [[b, 1] for _, b in expected[root]]
            assert not errors
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
