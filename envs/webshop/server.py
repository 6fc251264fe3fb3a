"""The shop as a web site: Starlette under uvicorn, on loopback, in a thread of the env's process.

Every page is rendered from pages.py and every state lives in the URL, so the site needs no
JavaScript at all; the Content-Security-Policy forbids scripts outright, and every string is
HTML-escaped, so a query like `<script>...</script>` is shown, never run.

Run it by hand to browse the shop: `python -m agentgym.envs.webshop.server` (prints the URL of
a session for a random train task).
"""

from __future__ import annotations

import html
import socket
import threading
import time

from agentgym.envs.webshop.pages import Link, Page, SearchBox, Shop, state_from_url, state_to_path
from agentgym.errors import require
from agentgym.envs.webshop.catalog import default_catalog
from agentgym.envs.webshop.goal import Goal
from agentgym.envs.webshop.search import default_engine
from agentgym.envs.webshop.tasks import WebShopTaskSpace

CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
STYLE = "body{font-family:sans-serif;max-width:60em;margin:1em auto}div.l{margin:.3em 0}a{margin-right:.6em}"


def page_html(page: Page, session: str) -> str:
    body = []
    for line in page.lines:
        parts = []
        for segment in line:
            if isinstance(segment, Link):
                href = html.escape(state_to_path(segment.target, session), quote=True)
                parts.append(f'<a href="{href}">{html.escape(segment.label)}</a>')
            elif isinstance(segment, SearchBox):
                action = html.escape(f"/s/{session}/results", quote=True)
                parts.append(f'<form method="get" action="{action}"><input type="text" name="q" '
                             'aria-label="search query" autofocus><input type="hidden" name="page" value="1">'
                             '<button type="submit">Search</button></form>')
            else:
                parts.append(f"<span>{html.escape(segment)}</span>")
        body.append('<div class="l">' + " ".join(parts) + "</div>")
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>WebShop</title>'
            f'<style>{STYLE}</style></head><body>\n' + "\n".join(body) + "\n</body></html>")


def build_app(sessions: dict[str, Shop]):
    """The Starlette app serving the sessions in `sessions` (session id -> Shop), which the
    owner may change at any time (a new episode is a new session)."""
    require("starlette", "web")
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    headers = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

    async def shop_page(request):
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string", b"")
        url = raw_path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        parsed = state_from_url(url)
        shop = sessions.get(parsed[0]) if parsed else None
        if shop is None:
            return HTMLResponse("<!doctype html><title>Not found</title><p>Not found.</p>", 404, headers=headers)
        page = shop.render(parsed[1])
        return HTMLResponse(page_html(page, parsed[0]), page.status, headers=headers)

    async def not_found(request):
        return HTMLResponse("<!doctype html><title>Not found</title><p>Not found.</p>", 404, headers=headers)

    return Starlette(routes=[Route("/s/{rest:path}", shop_page), Route("/{rest:path}", not_found)])


class ShopServer:
    """uvicorn serving `build_app` on 127.0.0.1 at a free port, in a daemon thread.

    `start()` returns once the socket accepts connections; `stop()` shuts uvicorn down and
    joins its thread, so a closed env leaves no thread behind."""

    def __init__(self):
        self.sessions: dict[str, Shop] = {}
        self._server = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0

    def __getstate__(self) -> dict:
        return {"sessions": self.sessions}  # a copy serves on its own port once started

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        self.sessions.update(state["sessions"])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        uvicorn = require("uvicorn", "web")
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(build_app(self.sessions), log_level="warning", access_log=False, lifespan="off",
                                loop="asyncio", http="h11", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"webshop-server-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the web shop server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None


def main() -> None:  # pragma: no cover - manual browsing

    task = WebShopTaskSpace().split("train")[0]
    server = ShopServer()
    server.sessions["demo"] = Shop(default_catalog(), default_engine(), Goal.from_params(task.params, task.seed))
    server.start()
    print(f"web shop at {server.base_url}/s/demo/  (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
