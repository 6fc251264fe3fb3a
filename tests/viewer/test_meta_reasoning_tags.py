"""Issue 41: the viewer shows each step's meta-reasoning tag (RLVMR), its meta reward and what broke
the format, from what the reward hook kept in the episode's metadata, or parsed from the reply
when a file has no such record (an `agentgym rollout --out` file)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from agentgym.rewards.meta_reasoning import MetaReasoningConfig, apply_meta_rewards  # noqa: E402
from agentgym.trajectory import Step, Trajectory  # noqa: E402
from agentgym.viewer.app import build_app, make_sources  # noqa: E402


def _episode(meta: bool) -> dict:
    steps = [Step(observation="o", anchor="a", text="<planning>desk first</planning><action>go to desk 1</action>",
                  action="go to desk 1", action_valid=True),
             Step(observation="o", anchor="b", text="<explore>x<action>open drawer 1</action>",
                  action="open drawer 1", action_valid=True),
             Step(observation="o", anchor="c", text="take pen", action="take pen", action_valid=True)]
    traj = Trajectory(task_id="t", group_id="g", success=True, score=1.0, steps=steps)
    if meta:
        apply_meta_rewards([traj], MetaReasoningConfig(planning=0.5, format_penalty=0.1))
    return traj.to_dict()


@pytest.mark.parametrize("meta", [True, False])
def test_episode_steps_carry_their_meta_reasoning_tag(tmp_path, meta):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_episode(meta)) + "\n")
    client = TestClient(build_app(make_sources([path])), base_url="http://127.0.0.1")
    steps = client.get("/api/s/0/f/0/e/0").json()["steps"]
    tags = [s.get("meta_tag") for s in steps]
    assert tags == ["planning", None, None], tags
    assert steps[0]["meta_ok"] is True and steps[1]["meta_ok"] is False and "opened inside" in steps[1]["meta_problem"]
    if not meta:
        assert steps[2].get("meta_ok") is None  # an untagged reply in a file with no record: nothing to show
    else:
        assert steps[0]["meta_reward"] == pytest.approx(0.5) and steps[1]["meta_reward"] == pytest.approx(-0.1)
        assert steps[2]["meta_ok"] is False  # the hook scored it: a reply with no tags breaks the format


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_the_page_shows_the_tags(tmp_path):
    pytest.importorskip("playwright")
    import os
    import threading
    import time

    from agentgym.envs.webshop.browser import CHROMIUM_ARGS, chromium_path
    from agentgym.viewer.app import make_server

    if not os.path.exists(chromium_path()):
        pytest.skip("needs Debian's chromium")
    from playwright.sync_api import sync_playwright

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_episode(True)) + "\n")
    server, sock, url = make_server([path], port=0)
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
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url + "#/s/0/f/0/e/0")
            page.wait_for_selector("[data-testid=step]")
            pills = page.locator("[data-testid=step] [data-testid=meta-tag]")
            assert pills.count() == 3
            assert pills.nth(0).inner_text() == "<planning> +0.500"
            assert pills.nth(1).inner_text() == "tag format -0.100" and "bad" in pills.nth(1).get_attribute("class")
            assert "opened inside" in pills.nth(1).get_attribute("title")
            assert not errors, errors
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
