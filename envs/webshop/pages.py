"""The shop's pages as data, shared by the text backend and the HTTP site.

A `State` says which page is shown (search, results, item, description, features, done) and
with what (query, result page, product, chosen options). `render` turns a state into a `Page`:
lines of text segments and links, each link carrying the state it leads to. The text backend
prints pages; the site (server.py) turns the same pages into HTML, and a state is encoded in
the URL, so a browser that follows links walks through exactly the states the text backend does.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Union
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from agentgym.envs.webshop.catalog import Catalog
from agentgym.envs.webshop.goal import Goal, reward
from agentgym.envs.webshop.search import RESULTS_PER_PAGE, SearchEngine

MAX_QUERY_CHARS = 200  # longer queries are cut, in both backends, before they reach the site
KINDS = ("search", "results", "item", "description", "features", "done")

BACK_TO_SEARCH = "Back to Search"
PREV = "< Prev"
NEXT = "Next >"
BUY = "Buy Now"
SEARCH_BOX = "Search"  # how the search box reads in an observation


@dataclass(frozen=True)
class State:
    kind: str = "search"
    query: str = ""
    page: int = 1
    asin: str = ""
    options: tuple[tuple[str, str], ...] = ()  # chosen (dimension, value), sorted

    def with_option(self, dim: str, value: str) -> "State":
        chosen = dict(self.options)
        chosen[dim] = value
        return replace(self, options=tuple(sorted(chosen.items())))


@dataclass(frozen=True)
class Link:
    label: str
    target: State


@dataclass(frozen=True)
class SearchBox:
    pass


Segment = Union[str, Link, SearchBox]


@dataclass
class Page:
    state: State
    lines: list[tuple[Segment, ...]]
    links: dict[str, Link] = field(default_factory=dict)  # lower-cased label -> link, in page order
    has_search: bool = False
    status: int = 200

    def text(self) -> str:
        return normalize_text("\n".join(" ".join(_segment_text(s) for s in line) for line in self.lines))


def _segment_text(segment: Segment) -> str:
    if isinstance(segment, Link):
        return f"[{segment.label}]"
    if isinstance(segment, SearchBox):
        return f"[{SEARCH_BOX}]"
    return segment


def normalize_text(text: str) -> str:
    """Whitespace-normalized page text: what both backends return as the observation."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def clean_query(query: str) -> str:
    """The query as the site will see it: control and surrogate characters dropped (a browser's
    text box drops line breaks, and lone surrogates cannot travel as UTF-8), whitespace
    collapsed, cut to MAX_QUERY_CHARS."""
    kept = "".join(ch for ch in query if unicodedata.category(ch) not in ("Cc", "Cs", "Cn", "Co"))
    return " ".join(kept.split())[:MAX_QUERY_CHARS].strip()


def anchor(state: State, results: tuple[str, ...] = ()) -> str:
    """A hash of what the page is, not how it was reached: two result pages listing the same
    products are the same state for GiGPO, whatever the query that produced them."""
    if state.kind == "results":
        key = ("results", state.page, results)
    elif state.kind == "search":
        key = ("search",)
    else:
        key = (state.kind, state.asin, state.options)
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


class Shop:
    """Renders the pages of one shopper's session (the goal shows on every page)."""

    def __init__(self, catalog: Catalog, engine: SearchEngine, goal: Goal):
        self.catalog = catalog
        self.engine = engine
        self.goal = goal

    def results(self, query: str) -> tuple[str, ...]:
        return self.engine.search(query)

    def page_results(self, state: State) -> tuple[str, ...]:
        start = (state.page - 1) * RESULTS_PER_PAGE
        return self.results(state.query)[start:start + RESULTS_PER_PAGE]

    def score(self, state: State) -> float:
        product = self.catalog.by_asin.get(state.asin)
        return reward(self.goal, product, dict(state.options)) if product else 0.0

    def render(self, state: State) -> Page:
        header: list[tuple[Segment, ...]] = [("WebShop",), (f"Instruction: {self.goal.instruction}",)]
        page = Page(state, header)
        product = self.catalog.by_asin.get(state.asin)
        if state.kind == "search":
            page.lines.append((SearchBox(),))
            page.has_search = True
        elif state.kind == "results":
            self._results(page, state)
        elif state.kind in ("item", "description", "features", "done") and _offers(product, state.options):
            getattr(self, "_" + state.kind)(page, state, product)
        else:
            page.lines.append(("Page not found.",))
            self._add(page, (Link(BACK_TO_SEARCH, State()),))
            page.status = 404
        return page

    # --- pages ---------------------------------------------------------------------------------
    @staticmethod
    def _add(page: Page, line: tuple[Segment, ...]) -> None:
        page.lines.append(line)
        for segment in line:
            if isinstance(segment, Link):
                page.links.setdefault(segment.label.lower(), segment)

    def _results(self, page: Page, state: State) -> None:
        hits = self.results(state.query)
        n_pages = max(1, math.ceil(len(hits) / RESULTS_PER_PAGE))
        if not 1 <= state.page <= n_pages:
            page.lines.append(("Page not found.",))
            self._add(page, (Link(BACK_TO_SEARCH, State()),))
            page.status = 404
            return
        self._add(page, (Link(BACK_TO_SEARCH, State()),))
        page.lines.append((f"Results for: {state.query}",))
        if not hits:
            page.lines.append(("No products match your search.",))
            return
        page.lines.append((f"Page {state.page} of {n_pages} (Total results: {len(hits)})",))
        nav: list[Segment] = []
        if state.page > 1:
            nav.append(Link(PREV, replace(state, page=state.page - 1)))
        if state.page < n_pages:
            nav.append(Link(NEXT, replace(state, page=state.page + 1)))
        if nav:
            self._add(page, tuple(nav))
        for asin in self.page_results(state):
            product = self.catalog.by_asin[asin]
            self._add(page, (Link(asin, State("item", state.query, state.page, asin)),))
            page.lines.append((product.title,))
            page.lines.append((f"${product.price:.2f}",))

    def _item(self, page: Page, state: State, product) -> None:
        self._add(page, (Link(BACK_TO_SEARCH, State()), Link(PREV, State("results", state.query, state.page))))
        for dim, values in product.options:
            self._add(page, (f"{dim}:",) + tuple(Link(v, state.with_option(dim, v)) for v in values))
        if state.options:
            chosen = "; ".join(f"{dim}: {value}" for dim, value in state.options)
            page.lines.append((f"Selected: {chosen}",))
        page.lines.append((product.title,))
        page.lines.append((f"Price: ${product.price:.2f}",))
        self._add(page, (Link("Description", replace(state, kind="description")),
                         Link("Features", replace(state, kind="features")),
                         Link(BUY, replace(state, kind="done"))))

    def _description(self, page: Page, state: State, product) -> None:
        self._add(page, (Link(BACK_TO_SEARCH, State()), Link(PREV, replace(state, kind="item"))))
        page.lines.append((product.description,))

    def _features(self, page: Page, state: State, product) -> None:
        self._add(page, (Link(BACK_TO_SEARCH, State()), Link(PREV, replace(state, kind="item"))))
        for feature in product.features:
            page.lines.append((f"- {feature}",))

    def _done(self, page: Page, state: State, product) -> None:
        page.lines.append(("Thank you for shopping with us!",))
        page.lines.append((f"You bought: {product.title}",))
        if state.options:
            page.lines.append(("Options: " + "; ".join(f"{d}: {v}" for d, v in state.options),))
        page.lines.append((f"Your score (min 0.0, max 1.0): {self.score(state):.4f}",))


def _offers(product, options: tuple[tuple[str, str], ...]) -> bool:
    """The product exists and offers every chosen option (a hand-edited URL may not)."""
    return product is not None and all(value in product.option_values(dim) for dim, value in options)


# --- states in URLs ------------------------------------------------------------------------------
def state_to_path(state: State, session: str) -> str:
    """The site path of a state: /s/<session>/<kind>[/<asin>]?q=..&page=..&o.<dim>=.."""
    base = f"/s/{quote(session, safe='')}"
    if state.kind == "search":
        return base + "/"
    params = [("q", state.query), ("page", str(state.page))]
    params += [(f"o.{dim}", value) for dim, value in state.options]
    path = f"{base}/{state.kind}"
    if state.kind != "results":
        path += f"/{quote(state.asin, safe='')}"
    return f"{path}?{urlencode(params)}"


def state_from_url(url: str) -> tuple[str, State] | None:
    """(session, state) of a site URL or path; None for anything that is not a shop page."""
    parts = urlsplit(url)
    segments = [unquote(s) for s in parts.path.split("/")]
    if len(segments) < 3 or segments[1] != "s":
        return None
    session, rest = segments[2], [s for s in segments[3:] if s]
    if not rest:
        return session, State()
    kind = rest[0]
    if kind not in KINDS or kind == "search" or (kind == "results") != (len(rest) == 1) or len(rest) > 2:
        return None
    query, page, options = "", 1, {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "q":
            query = clean_query(value)
        elif key == "page":
            page = int(value) if value.isdigit() and len(value) < 6 else 0
        elif key.startswith("o."):
            options[key[2:]] = value
    asin = rest[1] if len(rest) == 2 else ""
    return session, State(kind, query, page, asin, tuple(sorted(options.items())))
