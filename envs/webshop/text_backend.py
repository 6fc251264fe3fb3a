"""The text backend: pages rendered straight to text, no HTTP. What training runs on."""

from __future__ import annotations

from dataclasses import dataclass

from agentgym.envs.webshop.pages import Page, Shop, State


@dataclass(frozen=True)
class View:
    """What an agent sees of a page, and what it can do there. Both backends return these."""

    state: State
    text: str
    labels: dict[str, str]  # lower-cased label -> label as shown, in page order
    has_search: bool


def view_of(page: Page) -> View:
    return View(page.state, page.text(), {k: link.label for k, link in page.links.items()}, page.has_search)


class TextBackend:
    def __init__(self):
        self.shop: Shop | None = None
        self.page: Page | None = None

    def reset(self, shop: Shop) -> View:
        self.shop = shop
        return self._show(State())

    def click(self, label: str) -> View:
        return self._show(self.page.links[label.lower()].target)

    def search(self, query: str) -> View:
        return self._show(State("results", query, 1))

    def show(self, state: State) -> View:
        """The page of `state`, as if navigated to (a restored snapshot)."""
        return self._show(state)

    def _show(self, state: State) -> View:
        self.page = self.shop.render(state)
        return view_of(self.page)

    def close(self) -> None:
        self.page = None
