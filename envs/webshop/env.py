"""WebShopEnv: find and buy the product an instruction asks for.

One environment, two backends speaking the same action language:
- "text" (default): pages rendered to text in-process, thousands of steps per second;
- "browser": the shop served over HTTP on loopback and driven by headless Chromium through
  Playwright; the observation is the page's text read from the DOM.

Actions are `search[query]` (on the search page) and `click[label]` for any bracketed label on
the page. Anything else is an invalid action: the page stays as it was and the observation says
why. The episode ends when the agent clicks [Buy Now]; the reward is then WebShop's score of
the purchase (goal.py), 0 on every earlier step.
"""

from __future__ import annotations

import re

from agentgym.core import TextEnv
from agentgym.envs.webshop.catalog import default_catalog
from agentgym.envs.webshop.goal import Goal
from agentgym.envs.webshop.pages import KINDS, Shop, State, anchor, clean_query
from agentgym.envs.webshop.search import default_engine
from agentgym.envs.webshop.tasks import WebShopTaskSpace
from agentgym.envs.webshop.text_backend import TextBackend, View
from agentgym.snapshot import need, need_bool, need_int, need_keys, need_score, need_str
from agentgym.tasks.spec import TaskSpec

_ACTION = re.compile(r"\s*(search|click)\s*\[(.*)\]\s*", re.S | re.I)
SEARCH_HINT = "search[<your query>]"

RULES = """You are shopping in a web store for the product the instruction describes.
Each page shows text and clickable elements in brackets, like [Buy Now] or [B0A1B2C3D4].
Actions (one per turn):
  search[<your query>]  type a query in the search box (only on the search page)
  click[<element>]      click a bracketed element on the current page, e.g. click[Next >]
On a product page, click option values (size, color, ...) to select them, then click[Buy Now].
The episode ends when you buy; you are scored on how well the product, its options and its
price match the instruction."""


class WebShopEnv(TextEnv):
    task_space = WebShopTaskSpace()
    rules = RULES
    snapshot_version = 1

    def __init__(self, backend: str = "text", render_mode: str | None = None, **backend_kwargs):
        super().__init__(render_mode=render_mode)
        if backend == "text":
            self.backend = TextBackend()
        elif backend == "browser":
            from agentgym.envs.webshop.browser import BrowserBackend  # lazy: the browser backend needs playwright

            self.backend = BrowserBackend(**backend_kwargs)
        else:
            raise ValueError(f"backend must be 'text' or 'browser', got {backend!r}")
        self.backend_name = backend
        self.catalog = default_catalog()
        self.engine = default_engine()
        self.shop: Shop | None = None
        self.view: View | None = None
        self.done = False
        self.score = 0.0

    # --- TextEnv ------------------------------------------------------------------------------
    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        self.shop = Shop(self.catalog, self.engine, Goal.from_params(task.params, task.seed))
        self.view = self.backend.reset(self.shop)
        self.done, self.score = False, 0.0
        return self.view.text, self._info(True)

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        error = self._execute(action)
        if error is not None:
            return f"Invalid action: {error}\n{self.view.text}", 0.0, self.done, False, self._info(False)
        reward = 0.0
        if self.view.state.kind == "done":
            self.done = True
            self.score = reward = self.shop.score(self.view.state)
        return self.view.text, reward, self.done, False, self._info(True)

    # --- snapshots: the page state (what is shown is rendered from it) ------------------------
    def snapshot_supported(self) -> bool:
        return self.backend_name == "text"

    def snapshot_refusal(self) -> str:
        return ("WebShop's browser backend keeps its page in a live Chromium, which cannot be saved as data: "
                "snapshot and branch the text backend (WebShop-v0), which renders the same pages")

    def _get_state(self) -> dict:
        st = self.view.state
        return {"kind": st.kind, "query": st.query, "page": st.page, "asin": st.asin,
                "options": [list(o) for o in st.options], "done": self.done, "score": self.score}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("kind", "query", "page", "asin", "options", "done", "score"))
        need(state["kind"] in KINDS, f"kind must be one of {', '.join(KINDS)}, got {state['kind']!r}")
        options = state["options"]
        need(isinstance(options, list) and all(isinstance(o, list) and len(o) == 2 and all(isinstance(x, str) for x in o)
                                               for o in options), "options must be a list of [dimension, value] pairs")
        page_state = State(state["kind"], need_str(state["query"], "query"), need_int(state["page"], 1, 1 << 20, "page"),
                           need_str(state["asin"], "asin"), tuple(sorted(tuple(o) for o in options)))
        need(page_state.options == tuple(tuple(o) for o in options)
             and len({dim for dim, _ in options}) == len(options), "options must be sorted, one value per dimension")
        if page_state.kind in ("search", "results"):
            need(not page_state.asin and not options, f"a {page_state.kind} page has no product or options")
        if page_state.kind == "search":
            need(page_state == State(), "the search page has no query or page number")
        done, score = need_bool(state["done"], "done"), need_score(state["score"], "score")
        need(done == (page_state.kind == "done"), "done must be true exactly on the page after Buy Now")
        page = self.shop.render(page_state)  # rendering is pure: nothing changes until it passes
        need(page.status == 200, f"no page of the shop shows {page_state}")
        need(score == (self.shop.score(page_state) if done else 0.0), "score is not the score of the purchase")
        self.view = self.backend.show(page_state)
        self.done, self.score = done, score

    def close(self):
        self.backend.close()
        super().close()

    # --- actions ------------------------------------------------------------------------------
    def _execute(self, action: str) -> str | None:
        """Run `action` on the backend; the reason it cannot run, or None when it ran."""
        if self.done:
            return "the episode is over: you already bought a product."
        match = _ACTION.fullmatch(action)
        if match is None:
            return "write search[<your query>] or click[<element>], with an element shown in brackets."
        verb, arg = match.group(1).lower(), match.group(2)
        if verb == "search":
            if not self.view.has_search:
                return "there is no search box on this page; click[Back to Search] first."
            query = clean_query(arg)
            if not query:
                return "the query is empty; write search[words describing the product]."
            self.view = self.backend.search(query)
            return None
        label = " ".join(arg.split()).lower()
        if label not in self.view.labels:
            shown = arg if len(arg) <= 60 else arg[:57] + "..."
            return f"there is no [{shown}] to click on this page."
        self.view = self.backend.click(label)
        return None

    def _info(self, valid: bool) -> dict:
        state = self.view.state
        results = self.shop.page_results(state) if state.kind == "results" else ()
        actions = [SEARCH_HINT] if self.view.has_search else []
        actions += [f"click[{label}]" for label in self.view.labels.values()]
        return {
            "task_id": self.task.task_id,
            "instruction": self.shop.goal.instruction,
            "anchor": anchor(state, results),
            "admissible_actions": [] if self.done else actions,
            "action_valid": valid,
            "success": self.done and self.score >= 1.0,
            "score": self.score,
            # What buying the open product with the chosen options would score (0 away from a
            # product page): verifiable from the state, rises as the agent finds and configures it.
            "progress": self.score if self.done else (
                self.shop.score(state) if state.kind in ("item", "description", "features") else 0.0),
            "page": state.kind,
        }
