"""The browser backend: headless Chromium, driven by Playwright, on the shop served over HTTP.

Each env owns one ShopServer and one browser. Actions are real clicks and a real form
submission; the observation is read back from the DOM (text, links written as [label], the
search form as [Search]), and the page's state comes from its URL, so reward and anchor are
whatever the browser actually reached.

A browser or server that dies mid-episode raises BrowserBackendError from step(): that is an
infrastructure failure (the rollout engine marks the episode infra_error), not a bad action.
The next reset() relaunches whatever is dead.

Temporary files: each browser writes its own (Chromium's org.chromium.* folders) into a folder
of ours that is removed when the browser is shut down, killed or not; each Playwright driver
likewise (profiles, artifacts). The folders are named after their owner process, so one left
by a killed process is removed by the next launch anywhere on the machine. The env pickles
(after reset too): the copy holds no browser and starts one on its next reset.
"""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import threading
import uuid

from agentgym.envs.webshop.pages import Shop, normalize_text, state_from_url
from agentgym.envs.webshop.server import ShopServer
from agentgym.envs.webshop.text_backend import View
from agentgym.errors import AgentGymError, require
from agentgym.owned_tmp import owned_tmp_dir, sweep_dead_owners

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", "--mute-audio", "--disable-renderer-backgrounding",
    # Network service and GPU (software compositing) inside the browser process: two fewer
    # processes per navigation to schedule; about 25% less wall time per action on a busy machine.
    "--enable-features=NetworkServiceInProcess2", "--in-process-gpu",
    "--disable-features=BackForwardCache,AudioServiceOutOfProcess",
]
VIEWPORT_HEIGHT = 2400

# Reads the page as an agent sees it: block elements start lines, links read [label], a form
# reads as its submit button. Generic DOM walking, so what it reports is what the page shows.
READ_PAGE_JS = r"""async () => {
  if (document.readyState === "loading")  // navigation waits stop at commit; finish parsing here
    await new Promise((done) => document.addEventListener("DOMContentLoaded", done, {once: true}));
  const BLOCK = new Set(["DIV","P","H1","H2","H3","H4","H5","H6","LI","UL","OL","BR","SECTION","HEADER",
                         "FOOTER","MAIN","NAV","TABLE","TR","BODY","FORM"]);
  const SKIP = new Set(["SCRIPT","STYLE","TEMPLATE","NOSCRIPT","HEAD","INPUT"]);
  const lines = []; const links = []; let line = ""; let hasSearch = false;
  const flush = () => { lines.push(line); line = ""; };
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { line += node.nodeValue; return; }
    if (node.nodeType !== Node.ELEMENT_NODE || SKIP.has(node.tagName)) return;
    if (node.tagName === "FORM") {
      const button = node.querySelector("button, input[type=submit]");
      hasSearch = hasSearch || !!node.querySelector("input[type=text], input:not([type])");
      flush(); line += "[" + (button ? (button.textContent || button.value).trim() : "Submit") + "]"; flush();
      return;
    }
    if (node.tagName === "A" && node.hasAttribute("href")) {
      const label = node.textContent.replace(/\s+/g, " ").trim();
      const box = node.getBoundingClientRect();
      const onScreen = box.width > 0 && box.top >= 0 && box.bottom <= window.innerHeight;
      links.push([label, onScreen ? [box.x + box.width / 2, box.y + box.height / 2] : null]);
      line += " [" + label + "] "; return;
    }
    const block = BLOCK.has(node.tagName);
    if (block) flush();
    for (const child of node.childNodes) walk(child);
    if (block) flush();
  };
  walk(document.body); flush();
  return {text: lines.join("\n"), links: links, hasSearch: hasSearch, url: location.href};
}"""


class BrowserBackendError(AgentGymError, RuntimeError):
    """The browser or the shop server failed: an infrastructure error, not the agent's."""


def chromium_path() -> str:
    return os.environ.get("AGENTGYM_CHROMIUM", CHROMIUM)


# --- temporary folders named after their owner process ------------------------------------------
TMP_PREFIX = "agentgym-web-"


def owned_tmp(kind: str) -> str:
    """A new temporary folder named after this process (pid and start time) and `kind`."""
    return str(owned_tmp_dir(TMP_PREFIX, f"{kind}-"))


def sweep_stale_tmp(parent: str | None = None) -> int:
    """Remove the agentgym-web-* folders whose owner process is gone (a killed rollout)."""
    return sweep_dead_owners(TMP_PREFIX, parent)


def _playwright_transport():
    """Playwright's transport module, which starts the driver: `playwright._impl.transport` from
    1.65, `playwright._impl._transport` before; None if neither exists."""
    for name in ("playwright._impl.transport", "playwright._impl._transport"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _start_driver(sync_api, tmp: str):
    """sync_playwright().start() with the driver's TMPDIR in `tmp`: Playwright's transport
    builds the driver's environment with get_driver_env(), wrapped here for this one start (so
    this process's own environment never changes)."""
    transport = _playwright_transport()
    original = getattr(transport, "get_driver_env", None)
    if original is None:
        return sync_api.sync_playwright().start()
    with _DRIVER_START:
        transport.get_driver_env = lambda: {**original(), "TMPDIR": tmp}
        try:
            return sync_api.sync_playwright().start()
        finally:
            transport.get_driver_env = original


_DRIVER_START = threading.Lock()


class _Drivers:
    """One Playwright driver per thread, shared by that thread's envs.

    Playwright's sync API runs an event loop inside the calling thread, so a thread can hold
    only one driver; each env still gets its own browser. A driver whose process died is
    replaced on the next acquire."""

    def __init__(self):
        self._local = threading.local()

    def acquire(self):
        held = getattr(self._local, "held", None)
        if held is None:
            sync_api = require("playwright.sync_api", "web")
            sweep_stale_tmp()
            tmp = owned_tmp("driver")
            try:
                held = [_start_driver(sync_api, tmp), 0, tmp]
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            self._local.held = held
        held[1] += 1
        return held[0]

    def restart(self, playwright):
        """Replace a driver that failed (its process died): every env of the thread moves over
        on its next launch."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] is playwright:
            self._local.held = None
            self._stop(held)
            return self.acquire()
        return self.acquire()

    def release(self, playwright) -> None:
        held = getattr(self._local, "held", None)
        if held is None or held[0] is not playwright:
            return  # replaced after its process died; already stopped
        held[1] -= 1
        if held[1] <= 0:
            self._local.held = None
            self._stop(held)

    @staticmethod
    def _stop(held) -> None:
        try:
            held[0].stop()
        except Exception:
            pass
        shutil.rmtree(held[2], ignore_errors=True)  # profiles and artifacts of browsers it lost


_DRIVERS = _Drivers()


def _chromium_processes() -> dict[int, int]:
    """pid -> parent pid of the Chromium processes descending from this process (from /proc)."""
    parents, names = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        parents[int(entry)] = int(tail.split()[1])
        names[int(entry)] = head.split("(", 1)[1]
    me, found = os.getpid(), {}
    for pid, ppid in parents.items():
        ancestor, hops = ppid, 0
        while ancestor not in (0, 1, me) and hops < 64:
            ancestor, hops = parents.get(ancestor, 0), hops + 1
        if ancestor == me and "chrom" in names[pid]:
            found[pid] = ppid
    return found


class BrowserBackend:
    def __init__(self, executable_path: str | None = None, timeout_ms: int = 15_000, headless: bool = True,
                 viewport_height: int = VIEWPORT_HEIGHT):
        self.viewport_height = viewport_height
        self.executable_path = executable_path or chromium_path()
        self.timeout_ms = timeout_ms
        self.headless = headless
        self.server = ShopServer()
        self._playwright = None
        self._browser = None
        self._page = None
        self._session = None
        self._link_index: dict[str, tuple[int, list | None]] = {}  # label -> (index among links, center)
        self.browser_pid: int | None = None  # Chromium's main process (tests kill it to simulate a crash)
        self._browser_tmp: str | None = None  # the browser's TMPDIR, removed when it is shut down
        self._sessions = itertools.count()
        self._prefix = uuid.uuid4().hex[:8]

    # --- pickling: the settings and the shop sessions, never a live browser ----------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.update(_playwright=None, _browser=None, _page=None, browser_pid=None, _browser_tmp=None,
                     _link_index={}, _sessions=next(self._sessions))
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state["_sessions"] = itertools.count(state["_sessions"])
        self.__dict__.update(state)

    # --- lifecycle ----------------------------------------------------------------------------
    def _launch(self, fresh_driver: bool = False) -> None:
        if not os.path.exists(self.executable_path):
            raise BrowserBackendError(
                f"no Chromium at {self.executable_path}: install it (`apt-get install chromium`) or set "
                "AGENTGYM_CHROMIUM to a Chromium binary")
        old_driver = self._playwright
        self._shutdown_browser()
        self._playwright = _DRIVERS.acquire()
        if fresh_driver and self._playwright is old_driver:  # still shared with other envs: replace it
            self._playwright = _DRIVERS.restart(self._playwright)
        before = _chromium_processes()
        try:
            self._browser = self._start_browser()
        except Exception:  # a dead driver: start a fresh one once, then give up
            self._playwright = _DRIVERS.restart(self._playwright)
            try:
                self._browser = self._start_browser()
            except Exception:
                self._shutdown_browser()
                raise
        # A tall window: every page of the shop fits, so every link can be clicked where it is.
        context = self._browser.new_context(java_script_enabled=True, service_workers="block",
                                            viewport={"width": 1280, "height": self.viewport_height})
        context.set_default_timeout(self.timeout_ms)
        self._page = context.new_page()
        procs = _chromium_processes()
        new = [pid for pid, ppid in procs.items() if pid not in before and ppid not in procs]
        self.browser_pid = min(new) if new else None

    def _start_browser(self):
        self._remove_browser_tmp()
        self._browser_tmp = owned_tmp("chromium")
        return self._playwright.chromium.launch(executable_path=self.executable_path, headless=self.headless,
                                                args=CHROMIUM_ARGS, env={**os.environ, "TMPDIR": self._browser_tmp})

    def _remove_browser_tmp(self) -> None:
        if self._browser_tmp is not None:
            shutil.rmtree(self._browser_tmp, ignore_errors=True)
            self._browser_tmp = None

    def _alive(self) -> bool:
        try:
            return (self._browser is not None and self._browser.is_connected()
                    and self._page is not None and not self._page.is_closed())
        except Exception:
            return False

    def _shutdown_browser(self) -> None:
        if self._browser is not None:
            try:
                self._browser.close()
            except Exception:  # already dead: nothing left to close
                pass
        if self._playwright is not None:
            _DRIVERS.release(self._playwright)
        self._remove_browser_tmp()  # what a killed browser left (its own folders are gone otherwise)
        self._playwright = self._browser = self._page = None
        self.browser_pid = None

    def close(self) -> None:
        self._shutdown_browser()
        self.server.stop()

    # --- backend interface --------------------------------------------------------------------
    def reset(self, shop: Shop) -> View:
        if not self.server.running:
            self.server.start()
        if not self._alive():
            self._launch()
        if self._session is not None:
            self.server.sessions.pop(self._session, None)
        self._session = f"{self._prefix}-{next(self._sessions)}"
        self.server.sessions[self._session] = shop
        try:
            return self._open_session()
        except BrowserBackendError:  # a browser or driver that died unnoticed: one fresh start
            self._launch(fresh_driver=True)
            return self._open_session()

    def _open_session(self) -> View:
        return self._act(lambda: self._page.goto(f"{self.server.base_url}/s/{self._session}/",
                                                 wait_until="commit"), navigate=False)

    def click(self, label: str) -> View:
        index, center = self._link_index[label.lower()]
        if center is not None:
            # A mouse click where the link is on screen, as a user clicks: one input event pair,
            # half the cost of a locator click (selector, scroll, box, stability checks).
            return self._act(lambda: self._page.mouse.click(*center))
        return self._act(lambda: self._page.locator("a[href]").nth(index).click(force=True))

    def search(self, query: str) -> View:
        def submit():
            box = self._page.locator("form input[name=q]")
            box.fill(query)
            box.press("Enter")
        return self._act(submit)

    # --- helpers ------------------------------------------------------------------------------
    def _act(self, action, navigate: bool = True) -> View:
        try:
            if navigate:
                # "commit" and not "domcontentloaded": the read waits for the DOM itself, which
                # saves a round trip to the driver per action.
                with self._page.expect_navigation(wait_until="commit"):
                    action()
            else:
                response = action()
                if response is None or not response.ok:
                    raise BrowserBackendError(f"the shop answered {response.status if response else 'nothing'}")
            return self._read()
        except BrowserBackendError:
            raise
        except Exception as exc:  # Playwright errors: browser crashed, target closed, timeout
            raise BrowserBackendError(f"browser backend failed: {type(exc).__name__}: {exc}".splitlines()[0]) from exc

    def _read(self) -> View:
        page = self._page.evaluate(READ_PAGE_JS)
        parsed = state_from_url(page["url"])
        if parsed is None or parsed[0] != self._session:
            raise BrowserBackendError(f"the browser left the shop: {page['url']}")
        self._link_index = {}
        labels: dict[str, str] = {}
        for i, (label, center) in enumerate(page["links"]):
            key = label.lower()
            if key not in labels:
                labels[key] = label
                self._link_index[key] = (i, center)
        return View(parsed[1], normalize_text(page["text"]), labels, bool(page["hasSearch"]))

    def evaluate(self, script: str):
        """Run JavaScript in the current page (tests read window flags with it)."""
        return self._page.evaluate(script)
