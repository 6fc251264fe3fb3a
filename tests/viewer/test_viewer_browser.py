"""The viewer in headless Chromium (Debian's, through Playwright): what the page shows equals what
the trajectory file says, filters filter, and hostile text stays text."""

from __future__ import annotations

import json
import math
import os
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

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold</b>'
BIG = 100_000


def hostile_file(path: Path) -> Path:
    step = {"observation": HOSTILE + "\n" + "A" * BIG, "anchor": "<i>anchor</i>", "text": f"<action>{HOSTILE}</action>",
            "action": "<iframe src='/'></iframe>", "action_valid": False, "reward": 0.0,
            "response_ids": [1, 2, 3], "response_logprobs": [-0.1, -2.0, -0.5],
            "messages": [{"role": "system", "content": HOSTILE}, {"role": "user", "content": "B" * BIG}]}
    traj = {"task_id": "<svg onload=alert(1)>", "group_id": '0:"><script>window.__pwned=3</script>', "env_id": "x",
            "steps": [step, dict(step)], "success": False, "score": 0.0, "instruction": HOSTILE,
            "final_observation": HOSTILE, "infra_error": False,
            "metadata": {"category": "<u>cat</u>", "tokens": [["<script>", "</b>", "&amp;"]] * 2,
                         "advantage": {"total": [0.5, -0.5]}}}
    path.write_text(json.dumps(traj) + "\n" + json.dumps({**traj, "group_id": "1:" + HOSTILE}) + "\n")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewer-browser")
    run = make_run(root)
    hostile = hostile_file(root / "hostile.jsonl")
    server, sock, url = make_server([run, hostile], port=0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "viewer server did not start"
        time.sleep(0.02)
    yield url, run, hostile
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    # bypass_csp: the page's CSP would stop injected scripts anyway; without it the hostile-text test
    # shows the text is escaped, not merely blocked (and Playwright may evaluate its wait predicates)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    yield page
    context.close()


def expected_anchor_groups(episodes: list[dict]) -> dict[tuple[int, int], int]:
    """(episode, step) -> anchor group, numbered like GiGPO's: per episode group, first appearance."""
    index: dict[tuple[str, str], int] = {}
    out = {}
    order = sorted(range(len(episodes)), key=lambda i: list(dict.fromkeys(e["group_id"] for e in episodes)).index(
        episodes[i]["group_id"]))
    for i in order:
        for t, step in enumerate(episodes[i]["steps"]):
            out[(i, t)] = index.setdefault((episodes[i]["group_id"], step["anchor"]), len(index))
    return out


def test_episode_shows_the_files_advantages_and_anchor_groups(served, page, tmp_path):
    url, run, _ = served
    episodes = load_lines(train_path(run, 5))
    anchors = expected_anchor_groups(episodes)
    page.goto(url)  # two sources: a list of runs
    page.get_by_role("link", name="run", exact=True).click()
    page.get_by_role("link", name="train iteration 5").click()
    page.locator("[data-testid=episode-row][data-episode='1'] a").click()
    page.wait_for_selector("[data-testid=step]")
    assert page.url.endswith("#/s/0/f/0/e/1")
    cards = page.locator("[data-testid=step]")
    ep = episodes[1]
    adv = ep["metadata"]["advantage"]
    assert cards.count() == len(ep["steps"])
    for t in range(len(ep["steps"])):
        card = cards.nth(t)
        for part in ("total", "episode", "step"):
            shown = card.locator(f"[data-testid=adv-{part}]")
            assert math.isclose(float(shown.get_attribute("data-value")), adv[part][t], abs_tol=1e-12)
            assert shown.inner_text() == f"{adv[part][t] + 0.0:+.4f}"  # + 0.0: JS prints -0 as +0
        assert int(card.get_attribute("data-anchor-group")) == anchors[(1, t)]
        size = sum(1 for g in anchors.values() if g == anchors[(1, t)])
        badge = card.locator("[data-testid=anchor]").inner_text()
        assert badge == f"anchor A{anchors[(1, t)]}" + (f" ×{size}" if size > 1 else "")
        assert (card.get_attribute("class").split().count("invalid") == 1) == (not ep["steps"][t]["action_valid"])
    # logprobs on hover
    token = cards.nth(0).locator(".tok").first
    token.hover()
    tip = page.locator("#tip")
    assert tip.is_visible()
    assert f"logprob {ep['steps'][0]['response_logprobs'][0]:.4f}" in tip.inner_text()
    shot = tmp_path / "viewer-episode.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    assert not page.errors


def test_side_by_side_highlights_the_anchor_groups_across_episodes(served, page, tmp_path):
    url, run, _ = served
    episodes = load_lines(train_path(run, 5))
    anchors = expected_anchor_groups(episodes)
    page.goto(url + "#/s/0/f/0/e/0")
    page.locator("[data-testid=side-by-side]").first.click()  # episode 0 next to episode 1 (same group)
    page.wait_for_selector("[data-testid=column] [data-testid=step]")
    a, b = (int(x) for x in page.url.rsplit("/cmp/", 1)[1].split("/"))
    cards = page.locator("[data-testid=column] [data-testid=step]")
    shown = {(int(cards.nth(k).get_attribute("data-episode")), int(cards.nth(k).get_attribute("data-step"))):
             int(cards.nth(k).get_attribute("data-anchor-group")) for k in range(cards.count())}
    assert shown == {key: g for key, g in anchors.items() if key[0] in (a, b)}
    shared = [g for g in set(shown.values()) if sum(1 for v in shown.values() if v == g) > 1
              and {e for (e, _), v in shown.items() if v == g} == {a, b}]
    assert shared, "the fixture should put episodes of one group in a common state"
    group = shared[0]
    page.locator(f"[data-testid=column] [data-testid=anchor][data-anchor-group='{group}']").first.click()
    lit = page.locator(".step.hl")
    lit_keys = {(int(lit.nth(k).get_attribute("data-episode")), int(lit.nth(k).get_attribute("data-step")))
                for k in range(lit.count())}
    assert lit_keys == {key for key, g in shown.items() if g == group}
    colors = {lit.nth(k).evaluate("el => getComputedStyle(el).borderLeftColor") for k in range(lit.count())}
    assert len(colors) == 1  # one colour per anchor group, in both columns
    page.screenshot(path=str(tmp_path / "viewer-side-by-side.png"), full_page=False)
    assert not page.errors


def test_filters(served, page, tmp_path):
    url, run, _ = served
    episodes = load_lines(train_path(run, 5))

    def rows() -> list[int]:
        page.wait_for_function("document.getElementById('app').dataset.rendered === location.hash")
        loc = page.locator("[data-testid=episode-row]")
        return sorted(int(loc.nth(k).get_attribute("data-episode")) for k in range(loc.count()))

    page.goto(url + "#/s/0/f/0")
    assert rows() == list(range(len(episodes)))
    page.locator("[data-testid=filter-failure]").check()
    page.wait_for_function("location.hash.includes('outcome=failure')")
    assert rows() == [i for i, e in enumerate(episodes) if not e["success"] and not e["infra_error"]]
    page.locator("[data-testid=filter-infra]").check()
    page.wait_for_function("location.hash.includes('outcome=infra')")
    assert rows() == [i for i, e in enumerate(episodes) if e["infra_error"]]
    page.locator("[data-testid=filter-all]").check()
    page.locator("[data-testid=filter-invalid]").check()
    page.wait_for_function("location.hash.includes('invalid=1') && !location.hash.includes('outcome')")
    invalid = [i for i, e in enumerate(episodes) if any(not s["action_valid"] for s in e["steps"])]
    assert invalid and rows() == invalid
    page.locator("[data-testid=filter-invalid]").uncheck()
    category = episodes[4]["metadata"]["category"]
    page.locator("[data-testid=filter-category]").select_option(category)
    page.wait_for_function("location.hash.includes('cat=')")
    assert rows() == [i for i, e in enumerate(episodes) if e["metadata"]["category"] == category]
    page.locator("[data-testid=filter-success]").check()
    page.wait_for_function("location.hash.includes('outcome=success')")
    assert rows() == [i for i, e in enumerate(episodes) if e["metadata"]["category"] == category and e["success"]
                      and not e["infra_error"]]
    page.screenshot(path=str(tmp_path / "viewer-filtered.png"))
    assert not page.errors


def test_run_page_curves_and_reports_side_by_side(served, page):
    url, run, _ = served
    page.goto(url + "#/s/0")
    page.wait_for_selector(".curve[data-key='rollout/success_rate']")
    assert page.locator(".curve[data-key='rollout/success_rate']").get_attribute("data-points") == "10"
    assert page.locator(".curve[data-key='eval/success_rate']").get_attribute("data-points") == "2"
    assert page.locator(".curve[data-key='rollout/success_rate'] circle").count() == 10
    page.get_by_role("button", name="compare").click()
    page.wait_for_selector("[data-testid=report-compare]")
    row = page.locator("[data-testid=report-compare] tr", has_text="success rate").first.inner_text()
    assert "0.000" in row and "1.000" in row and "+1.000" in row  # random at iteration 0, oracle at 10
    assert not page.errors


def test_hostile_text_renders_as_text_and_the_page_stays_responsive(served, page, tmp_path):
    url, _, hostile = served
    page.goto(url + "#/s/1/f/0")
    page.wait_for_selector("[data-testid=episode-row]")
    assert HOSTILE in page.locator(".group").first.inner_text()  # the instruction, as text
    started = time.monotonic()
    page.locator("[data-testid=episode-row][data-episode='0'] a").click()
    page.wait_for_selector("[data-testid=step]")
    obs = page.locator("[data-testid=step] pre").first
    assert obs.inner_text().startswith(HOSTILE)
    page.locator("[data-testid=step] button.more").first.click()  # the whole 100 kB observation
    assert len(page.locator("[data-testid=step] pre").first.inner_text()) > BIG
    page.locator("[data-testid=step] details summary").first.click()  # the prompt, messages built on open
    assert page.locator("[data-testid=step] .msg").first.inner_text().endswith(HOSTILE)
    assert time.monotonic() - started < 15
    t0 = time.monotonic()
    assert page.evaluate("() => 1 + 1") == 2
    assert time.monotonic() - t0 < 2
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("img, iframe, svg[onload], b, u, i").count() == 0
    assert page.locator("script").count() == 1  # viewer.js, nothing injected
    tokens = page.locator("[data-testid=step]").first.locator(".tok")
    assert [tokens.nth(k).inner_text() for k in range(3)] == ["<script>", "</b>", "&amp;"]
    assert "<iframe src='/'></iframe>" in page.locator("[data-testid=step] .step-head").first.inner_text()
    page.screenshot(path=str(tmp_path / "viewer-hostile.png"))
    assert not page.errors
