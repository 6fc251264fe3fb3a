"""The browser backend: Chromium driven by Playwright against the served shop."""

import os
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401
from agentgym.core import INFO_KEYS
from agentgym.envs.webshop.browser import CHROMIUM, BrowserBackendError
from agentgym.envs.webshop.env import WebShopEnv
from agentgym.envs.webshop.tasks import WebShopTaskSpace

# Each test takes well under a minute even on a busy machine: a browser call that hangs fails its own
# test after BROWSER_TEST_TIMEOUT_S instead of holding the run until pyproject's suite-wide timeout.
BROWSER_TEST_TIMEOUT_S = 180
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"needs Debian's chromium at {CHROMIUM}"),
    pytest.mark.timeout(BROWSER_TEST_TIMEOUT_S),
]

SPACE = WebShopTaskSpace()


@pytest.fixture(scope="module")
def benv():
    env = WebShopEnv(backend="browser")
    yield env
    env.close()


@pytest.fixture(scope="module")
def tenv():
    env = WebShopEnv()
    yield env
    env.close()


def squash(text: str) -> str:
    return " ".join(text.split())


def test_check_env_passes(benv):
    check_env(benv, skip_render_check=True)


def test_registered_id_makes_a_browser_env():
    env = gym.make("agentgym/WebShop-Browser-v0")
    assert env.unwrapped.backend_name == "browser" and env.spec.max_episode_steps == 15
    env.close()  # never reset: nothing was started, nothing to leak


def random_walk(env, task, rng, n):
    """Actions a curious agent might take on the text backend, including invalid ones."""
    actions = []
    _, info = env.reset(options={"task": task})
    for _ in range(n):
        roll = rng.random()
        if roll < 0.15:
            action = rng.choice(["click[nowhere]", "search[again]", "hello", "click[Buy Now]"])
        elif info["admissible_actions"]:
            options = info["admissible_actions"]
            action = options[int(rng.integers(len(options)))]
            if action.startswith("search"):
                action = f"search[{task.params['product_type']} {rng.choice(['', 'cheap', 'ünïcode ☃'])}]"
        else:
            break
        actions.append(action)
        _, _, terminated, _, info = env.step(action)
        if terminated:
            break
    return actions


def assert_same_run(benv, tenv, task, actions):
    b_obs, b_info = benv.reset(options={"task": task})
    t_obs, t_info = tenv.reset(options={"task": task})
    assert squash(b_obs) == squash(t_obs)
    for action in actions:
        b_obs, b_r, b_term, _, b_info = benv.step(action)
        t_obs, t_r, t_term, _, t_info = tenv.step(action)
        assert squash(b_obs) == squash(t_obs), action
        assert (b_r, b_term) == (t_r, t_term), action
        for key in INFO_KEYS:
            assert b_info[key] == t_info[key], (action, key)
        if b_term:
            break
    return b_info


def test_same_actions_same_observations_and_reward_in_both_backends(benv, tenv):
    rng = np.random.default_rng(3)
    tasks = SPACE.split("train")[:3] + SPACE.split("heldout_unseen")[:1]
    for task in tasks:
        info = assert_same_run(benv, tenv, task, SPACE.solve(task))
        assert info["success"] and info["score"] == 1.0
        assert_same_run(benv, tenv, task, random_walk(tenv, task, rng, 10))


def test_links_below_the_fold_are_clicked_too(tenv):
    small = WebShopEnv(backend="browser", viewport_height=100)  # most links off screen: locator clicks
    try:
        task = SPACE.split("train")[9]
        info = assert_same_run(small, tenv, task, SPACE.solve(task))
        assert info["success"]
    finally:
        small.close()


def test_bad_input_matches_the_text_backend(benv, tenv):
    task = SPACE.split("train")[7]
    actions = ["", "click[nothing]", "search[]", "search[" + "é" * 10_000 + "]", "click[Back to Search]",
               "search[\x00\ud800\u2028 shampoo\n\t]", "click[\ud83d\ude00]", "click[< Prev]", "search[x]"]
    assert_same_run(benv, tenv, task, actions)


def test_html_and_js_in_queries_never_run(benv):
    benv.reset(options={"task": SPACE.split("train")[0]})
    benv.backend.evaluate("() => { window.__agentgym_probe = 'alive'; }")  # scripts in *our* world work
    evil = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
            '"><svg onload="window.__pwned = 3"> shampoo')
    obs, _, _, _, info = benv.step(f"search[{evil}]")
    assert info["action_valid"] and info["page"] == "results"
    assert "<script>window.__pwned = 1</script>" in obs  # shown as text
    time.sleep(0.2)
    state = benv.backend.evaluate(
        "() => [window.__pwned === undefined, document.querySelectorAll('script, img, svg').length]")
    assert state == [True, 0]
    obs, _, _, _, info = benv.step("click[" + info["admissible_actions"][2][6:-1] + "]")  # an item page keeps q in its links
    assert info["page"] == "item" and benv.backend.evaluate("() => window.__pwned === undefined")


def driver_pids():
    """Playwright's driver processes among this process's children: node running Playwright's
    cli.js (by command line: the process name is "node" or, from Playwright 1.64, "MainThread")."""
    out = set()
    for p in psutil.Process().children():
        try:
            if any(arg.endswith("cli.js") for arg in p.cmdline()[1:2]):
                out.add(p.pid)
        except psutil.Error:
            pass
    return out


@pytest.mark.parametrize("victim", ["browser", "driver"])
def test_a_crash_raises_then_the_env_recovers_on_reset(victim):
    # In a thread of its own: its own Playwright driver, not the one the module's envs share. A
    # daemon thread joined with a deadline: a call that never returns (Playwright before 1.64 spins
    # forever once its driver died) fails here; pytest-timeout alone would leave the run waiting
    # for the thread at exit.
    failure = []

    def run():
        try:
            crash_and_recover(victim)
        except BaseException as exc:  # re-raised in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True, name=f"crash-{victim}")
    thread.start()
    deadline_s = BROWSER_TEST_TIMEOUT_S - 30
    thread.join(deadline_s)
    assert not thread.is_alive(), f"the env had not returned {deadline_s} s after its {victim} was killed"
    if failure:
        raise failure[0]


def crash_and_recover(victim):
    drivers_before = driver_pids()
    env = WebShopEnv(backend="browser")
    try:
        task = SPACE.split("train")[4]
        env.reset(options={"task": task})
        if victim == "browser":
            os.kill(env.backend.browser_pid, signal.SIGKILL)
        else:  # Playwright's node driver, which owns the browser
            (driver,) = driver_pids() - drivers_before
            os.kill(driver, signal.SIGKILL)
        time.sleep(0.3)
        with pytest.raises(BrowserBackendError):
            for action in SPACE.solve(task):  # the first action that touches the browser raises
                env.step(action)
        env.reset(options={"task": task})  # relaunches what died
        for action in SPACE.solve(task):
            _, reward, _, _, info = env.step(action)
        assert info["success"] and reward == 1.0
    finally:
        env.close()


def test_rollout_marks_a_browser_crash_as_infra_error():
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.rollout import collect

    class CrashingOracle(OraclePolicy):
        """Kills the rollout's browser (not the other tests' ones) before its second action."""

        def __init__(self, space):
            super().__init__(space)
            self.spare = {p.pid for p in psutil.Process().children(recursive=True)}

        def generate(self, prompts, sampling=None, contexts=None):
            if contexts[0].turn == 1:
                for child in psutil.Process().children(recursive=True):
                    if "chrom" in child.name() and child.pid not in self.spare:
                        child.kill()
            return super().generate(prompts, sampling, contexts)

    tasks = SPACE.split("train")[:1]
    trajs = collect("agentgym/WebShop-Browser-v0", tasks, CrashingOracle(SPACE), group_size=1)
    assert trajs[0].infra_error and not trajs[0].success
    trajs = collect("agentgym/WebShop-Browser-v0", tasks, OraclePolicy(SPACE), group_size=1)
    assert not trajs[0].infra_error and trajs[0].success


def test_close_leaves_no_process_or_thread_behind():
    WebShopEnv()  # catalog and search index (and their helper threads) exist before counting
    me = psutil.Process()
    threads_before = set(threading.enumerate())
    children_before = {p.pid for p in me.children(recursive=True)}
    env = WebShopEnv(backend="browser")
    env.reset(options={"task": SPACE.split("train")[0]})
    env.step("search[shampoo]")
    assert {p.pid for p in me.children(recursive=True)} - children_before  # a driver and a browser ran
    env.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [p for p in me.children(recursive=True) if p.pid not in children_before and p.is_running()
                 and p.status() != psutil.STATUS_ZOMBIE]
        extra_threads = set(threading.enumerate()) - threads_before
        if not alive and not extra_threads:
            break
        time.sleep(0.1)
    assert not alive and not extra_threads
