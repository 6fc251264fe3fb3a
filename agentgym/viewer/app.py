"""The viewer's web app: a JSON API over `data.Source`s and the static page, on loopback by default.

The page is plain HTML/CSS/JS from `static/` and builds every element from data with textContent,
never innerHTML; the Content-Security-Policy allows only the page's own script and style files, so
text from trajectories (observations, model replies) shows as text even if it holds markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from agentgym.errors import ConfigError, require
from agentgym.hosts import LOOPBACK_NAMES, bound_socket, check_host, is_loopback
from agentgym.safe_files import UnsafeFileError
from agentgym.viewer.data import Source

STATIC = Path(__file__).parent / "static"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def build_app(sources: Sequence[Source], loopback_only: bool = True):
    require("starlette", "web")
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    def reply(data, status: int = 200):
        return JSONResponse(data, status, headers=SECURITY_HEADERS)

    def source(request) -> Source:
        index = int(request.path_params["s"])
        if not 0 <= index < len(sources):
            raise KeyError(index)
        return sources[index]

    def guarded(handler):
        # Handlers read files: in the thread pool, so a large or slow file holds up only its own
        # request, never the event loop that answers all the others.
        from starlette.concurrency import run_in_threadpool

        async def run(request):
            try:
                return reply(await run_in_threadpool(handler, request))
            except UnsafeFileError as exc:  # not a regular file, or over a size limit: the user's to fix
                return reply({"error": str(exc)[:500]}, 422)
            except (KeyError, IndexError, FileNotFoundError) as exc:
                return reply({"error": f"not found: {str(exc)[:300]}"}, 404)
            except (ValueError, OSError, MemoryError, RecursionError) as exc:
                return reply({"error": f"could not read: {type(exc).__name__}: {str(exc)[:300]}"}, 500)
        return run

    async def index(request):
        return FileResponse(STATIC / "index.html", headers=SECURITY_HEADERS)

    routes = [
        Route("/", index),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/sources", guarded(lambda r: [{"index": i, "name": s.name, "path": str(s.path)}
                                                 for i, s in enumerate(sources)])),
        Route("/api/s/{s:int}", guarded(lambda r: source(r).summary())),
        Route("/api/s/{s:int}/metrics", guarded(lambda r: source(r).metrics())),
        Route("/api/s/{s:int}/r/{r:int}", guarded(lambda r: source(r).report(int(r.path_params["r"])))),
        Route("/api/s/{s:int}/f/{f:int}", guarded(lambda r: source(r).episodes(int(r.path_params["f"])).overview())),
        Route("/api/s/{s:int}/f/{f:int}/e/{e:int}",
              guarded(lambda r: source(r).episodes(int(r.path_params["f"])).episode(int(r.path_params["e"])))),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]

    async def not_found(request, exc):
        return Response("not found", 404, headers=SECURITY_HEADERS)

    middleware = [Middleware(SecurityHeaders)]
    if loopback_only:  # a page on another site cannot reach a loopback server by a DNS name it controls
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_NAMES)))
    return Starlette(routes=routes, middleware=middleware, exception_handlers={404: not_found})


class SecurityHeaders:
    """ASGI middleware: the CSP and friends on every response, static files included."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                         if k.lower().encode() not in names]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def make_sources(paths: Sequence[str | Path]) -> list[Source]:
    if not paths:
        raise ConfigError("pass a run dir or a trajectory JSONL file to view")
    return [Source(p) for p in paths]


def make_server(paths: Sequence[str | Path], host: str = "127.0.0.1", port: int = 8765, allow_remote: bool = False):
    """(uvicorn.Server, bound socket, url): the caller runs `server.run(sockets=[sock])`."""
    check_host(host, allow_remote, "viewer")
    sources = make_sources(paths)
    uvicorn = require("uvicorn", "web")
    app = build_app(sources, loopback_only=is_loopback(host))
    sock = bound_socket(host, port)
    sock.listen(128)  # connections queue from now on, so the URL printed before uvicorn starts works
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", loop="asyncio",
                            http="h11", timeout_graceful_shutdown=1)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    url = f"http://{'[' + shown + ']' if ':' in shown else shown}:{sock.getsockname()[1]}/"
    return uvicorn.Server(config), sock, url
