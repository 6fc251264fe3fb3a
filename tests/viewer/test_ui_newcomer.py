"""Issue 39, item 10 (the viewer's paper cuts), in headless Chromium: a single trajectory file opens
on its episodes; curves overlay runs, smooth and zoom, and their labels fit; byte tokens show their
character, not "?"; episodes can be searched and sorted by return or advantage, with a histogram
of the advantages."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("playwright")

from agentgym.envs.webshop.browser import CHROMIUM, CHROMIUM_ARGS, chromium_path  # noqa: E402
from agentgym.trainers.records import train_path  # noqa: E402
from agentgym.viewer.app import make_server  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from runfixture import load_lines, make_run  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(chromium_path()), reason=f"needs Debian's chromium at {CHROMIUM}"),
    pytest.mark.timeout(180),
]

REPLY = "café ✓ ok"
# a byte-level tokenizer's pieces: é is 2 UTF-8 bytes, ✓ is 3; each byte alone decodes to U+FFFD
PIECES = ["caf", "\ufffd", "\ufffd", " ", "\ufffd", "\ufffd", "\ufffd", " ok"]


def byte_token_file(path: Path) -> Path:
    step = {"observation": "obs", "anchor": "a", "text": REPLY, "action": REPLY, "action_valid": True, "reward": 1.0,
            "response_ids": list(range(len(PIECES))), "response_logprobs": [-0.1] * len(PIECES)}
    traj = {"task_id": "t-1", "group_id": "0:t-1", "env_id": "x", "steps": [step], "success": True, "score": 1.0,
            "instruction": "say it", "final_observation": "", "infra_error": False,
            "metadata": {"tokens": [PIECES]}}
    path.write_text(json.dumps(traj) + "\n")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewer-ui")
    run = make_run(root / "a")
    other = make_run(root / "b").rename(root / "b" / "other")  # a second run: its curves are overlaid
    with (other / "metrics.jsonl").open("w") as f:
        for step in range(1, 11):
            f.write(json.dumps({"step": step, "time": 0.0, "rollout/success_rate": 0.9 - 0.05 * step,
                                "train/pg_loss": -0.0004 * step}) + "\n")
    single = byte_token_file(root / "single.jsonl")
    server, sock, url = make_server([run, other, single], port=0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "viewer server did not start"
        time.sleep(0.02)
    yield url, run
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})  # the page's own CSP applies
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    yield page
    context.close()


def rendered(page, part: str = "#/"):
    """The page rendered a hash holding `part` (a locator wait: the page's CSP forbids wait_for_function)."""
    page.locator(f"#app[data-rendered*='{part}']").wait_for(state="attached")


def test_a_single_trajectory_file_opens_on_its_episodes_and_byte_tokens_show_their_character(served, page):
    url, _ = served
    page.goto(url + "#/s/2")
    page.wait_for_selector("[data-testid=episode-row]")
    assert page.url.endswith("#/s/2/f/0")
    page.locator("[data-testid=episode-row] a").first.click()
    page.wait_for_selector("[data-testid=tokens]")
    shown = page.locator("[data-testid=tokens] .tok").all_inner_texts()
    assert len(shown) == len(PIECES)
    assert "".join(shown).replace("\u200b", "") == REPLY and "\ufffd" not in "".join(shown)
    assert shown[1] == "é" and shown[4] == "✓"
    page.locator("[data-testid=tokens] .tok").nth(2).hover()
    assert "a further byte of the character before" in page.locator("#tip").inner_text()
    assert not page.errors


def test_curves_overlay_runs_smooth_zoom_and_their_labels_fit(served, page):
    url, _ = served
    page.goto(url + "#/s/0")
    success = page.locator(".curve[data-key='rollout/success_rate']")
    success.wait_for()
    assert success.get_attribute("data-runs") == "2" and success.locator("polyline").count() == 2
    colors = success.locator("polyline").evaluate_all("ls => ls.map(l => l.style.stroke)")
    assert len(set(colors)) == 2
    page.locator("[data-testid=overlay]").uncheck()
    assert success.locator("polyline").count() == 1
    page.locator("[data-testid=overlay]").check()
    # smoothing: each run keeps its raw line (faint) and gains a smoothed one
    page.locator("[data-testid=smooth]").fill("0.5")
    assert success.locator("polyline").count() == 4 and success.locator("polyline.raw").count() == 2
    # zoom by typing a step range, then by dragging across a plot
    page.locator("[data-testid=zoom-lo]").fill("3")
    page.locator("[data-testid=zoom-hi]").fill("6")
    page.locator("[data-testid=zoom-hi]").press("Enter")
    assert success.get_attribute("data-points") == "4"
    page.locator("[data-testid=zoom-reset]").click()
    assert success.get_attribute("data-points") == "10"
    box = success.locator("svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.4)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.95, box["y"] + box["height"] * 0.4, steps=5)
    page.mouse.up()
    assert 0 < int(success.get_attribute("data-points")) < 10
    assert page.locator("[data-testid=zoom-lo]").input_value() != ""
    # no axis label sticks out of its plot (small values such as -0.0004 included)
    out = page.evaluate("""() => [...document.querySelectorAll('.curve svg')].flatMap(svg => {
        const r = svg.getBoundingClientRect();
        return [...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect())
            .filter(b => b.left < r.left - 0.5 || b.right > r.right + 0.5 || b.bottom > r.bottom + 0.5); }).length""")
    assert out == 0
    assert not page.errors


def test_episodes_search_sort_and_advantage_histogram(served, page):
    url, run = served
    episodes = load_lines(train_path(run, 5))
    page.goto(url + "#/s/0/f/0")
    rendered(page)
    hist = page.locator("[data-testid=adv-hist]")
    advs = [sum(e["metadata"]["advantage"]["total"]) / len(e["metadata"]["advantage"]["total"])
            for e in episodes if e["metadata"].get("advantage", {}).get("total")]
    assert int(hist.get_attribute("data-n")) == len(advs)
    assert sum(int(c) for c in hist.get_attribute("data-counts").split(",")) == len(advs)
    page.locator("[data-testid=sort]").select_option("return-desc")
    rendered(page, "sort=return-desc")
    returns = [float(x) for x in page.locator("[data-testid=sorted] [data-testid=return]").all_inner_texts()]
    assert len(returns) == len(episodes) and returns == sorted(returns, reverse=True)
    page.locator("[data-testid=sort]").select_option("adv-asc")
    rendered(page, "sort=adv-asc")
    shown = [t for t in page.locator("[data-testid=sorted] [data-testid=mean-adv]").all_inner_texts() if t != "–"]
    assert [float(x) for x in shown] == sorted(float(x) for x in shown)
    task = episodes[0]["task_id"]
    page.locator("[data-testid=search]").fill(task)
    page.locator("[data-testid=search]").press("Enter")
    rendered(page, "q=")
    assert page.locator("[data-testid=episode-row]").count() == sum(e["task_id"] == task for e in episodes)
    assert int(page.locator("[data-testid=adv-hist]").get_attribute("data-n")) <= len(advs)
    assert not page.errors


def test_agentgym_view_of_one_trajectory_file_lands_on_its_episodes(browser, tmp_path):
    """`agentgym view traj.jsonl` (the only source): the first page is its episodes, not a list."""
    single = byte_token_file(tmp_path / "traj.jsonl")
    server, sock, url = make_server([single], port=0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "viewer server did not start"
            time.sleep(0.02)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(20_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.wait_for_selector("[data-testid=episode-row]")
        assert page.url.endswith("#/s/0/f/0") and page.locator("[data-testid=episode-row]").count() == 1
        assert not errors
        context.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
