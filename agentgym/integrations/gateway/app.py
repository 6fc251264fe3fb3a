"""The gateway's HTTP side: OpenAI's /v1/chat/completions and /v1/models over a `Recorder`.

An episode travels in the base URL (`http://127.0.0.1:PORT/episodes/<id>/v1`, so an unmodified
client carries it) or in an `X-Episode-Id` header on `/v1`; a call with neither is served and not
recorded. Requests that arrive together are sampled in one engine call (one worker thread drains
the queue: while a batch samples, the next one gathers). Every refusal is an OpenAI error object
(`{"error": {"message", "type", "param", "code"}}`) with OpenAI's status code, and leaves the
episode's other calls as they were: each client is untrusted, and what one sends is refused to it
alone (a Host header not naming loopback, a body over max_body_bytes, JSON that is not plain text
and numbers) while the others are served.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
import uuid
from dataclasses import dataclass

from agentgym.errors import ConfigError, require
from agentgym.hosts import check_host, host_name, is_loopback
from agentgym.integrations.gateway.chat_format import RequestError
from agentgym.integrations.gateway.recorder import Call, Prepared, Recorder


@dataclass
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8100
    api_key: str | None = None  # a bearer token every request must carry (None: none asked)
    allow_remote: bool = False  # serve beyond loopback (anyone who reaches the port samples the policy)
    max_batch: int = 32  # requests sampled in one engine call
    max_pending: int = 256  # queued requests beyond which a call is refused with 429
    # a batch waits for every open episode's next request (Batcher), but no longer than gather_s
    # without a new request, nor for an episode not answered for idle_s (abandoned)
    gather_s: float = 0.25
    idle_s: float = 5.0
    # and no request waits longer than max_wait_s for others (a trickle of requests, each within
    # gather_s of the last, beside an idle open episode, would hold every batch until idle_s)
    max_wait_s: float = 1.0
    max_body_bytes: int = 4 * 2**20  # a larger request body is refused (413) before it is read


# JSON nested deeper than this is refused (no chat request needs it; Python's parser recurses)
MAX_JSON_DEPTH = 32


def error_response(exc: RequestError):
    from starlette.responses import JSONResponse

    return JSONResponse(exc.body(), status_code=exc.status)


class Guard:
    """ASGI middleware: what is checked before a request is routed or its body read.

    Host: served on loopback, a request must name a loopback host. A web page the user opens can
    reach 127.0.0.1 through a name its own DNS points there (DNS rebinding), and its requests then
    carry that name: refused (400 `invalid_host`), as the viewer refuses them. A declared body over
    max_body_bytes is refused (413) unread; one sent without its length is bounded as it is read."""

    def __init__(self, app, loopback_only: bool, max_body_bytes: int, stats):
        self.app, self.loopback_only, self.max_body_bytes, self.stats = app, loopback_only, max_body_bytes, stats

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = {k.lower(): v for k, v in scope["headers"]}
            host = headers.get(b"host", b"").decode("latin-1")
            refusal = None
            if self.loopback_only and not is_loopback(host_name(host)):
                refusal = RequestError(f"Host {host!r} is not this loopback server (a page reaching it through DNS "
                                       "rebinding?): call it as 127.0.0.1 or localhost", code="invalid_host")
            elif (length := headers.get(b"content-length", b"0")).isdigit() and int(length) > self.max_body_bytes:
                refusal = too_large(self.max_body_bytes)
            if refusal is not None:
                self.stats[f"refused_{refusal.status}"] += 1
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def too_large(limit: int) -> RequestError:
    return RequestError(f"the request body is over {limit} bytes (the gateway's max_body_bytes): send less",
                        status=413, code="request_too_large")


def json_depth(value) -> int:
    """How deeply `value` nests lists and objects (iteratively: a deep value must not recurse here)."""
    depth, level = 0, [value]
    while level:
        level = [v for x in level if isinstance(x, (dict, list)) for v in (x.values() if isinstance(x, dict) else x)]
        depth += 1
    return depth - 1


def parse_json(raw: bytes):
    """A request body as JSON, refused (RequestError 400) unless plain: valid UTF-8 without lone
    surrogates (`"\\ud800"` decodes, but no tokenizer encodes it: it would fail every request sampled
    with it), no NaN or Infinity (not JSON; a reward of NaN would end training), nested at most
    MAX_JSON_DEPTH deep."""
    def constant(name):
        raise RequestError(f"{name} is not a JSON number: send a finite number")

    try:
        body = json.loads(raw, parse_constant=constant)
    except RecursionError:
        raise RequestError(f"the request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except RequestError:
        raise
    except ValueError as exc:  # not JSON, or not UTF-8
        raise RequestError(f"the request body is not valid JSON ({str(exc).splitlines()[0][:200]})") from None
    if json_depth(body) > MAX_JSON_DEPTH:
        raise RequestError(f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end].encode("utf-8", "backslashreplace").decode("ascii")
        raise RequestError(f"the request body holds a lone UTF-16 surrogate ({bad}), which is not text: "
                           "send valid Unicode", code="invalid_text") from None
    return body


class Batcher:
    """One worker thread that samples waiting requests in one engine call: as many as share
    sampling parameters and belong to distinct episodes (up to max_batch).

    When to sample: concurrent client episodes step their envs between calls and their next
    requests arrive spread over time; sampling whatever has arrived would split one turn of N
    episodes into several engine calls, each about as slow as one full call (a small model's
    decoding is per-step overhead, not per-row work). So the worker waits until every open episode
    has a request waiting, then samples them together, as the built-in rollout samples all its
    episodes' turn at once. It samples earlier once no request has come for gather_s (since the
    newest request or the end of the previous batch: an episode busy elsewhere, a slow tool), and
    stops waiting for an episode not answered for idle_s (a program that abandoned it without
    reporting its reward). Whatever it waits for, it samples once the oldest request has waited
    max_wait_s: no client, however it times its requests, holds the others longer. Calls without
    an episode wait for nothing (what arrived while the previous batch sampled is sampled together)."""

    def __init__(self, recorder: Recorder, max_batch: int, max_pending: int, gather_s: float = 0.25,
                 idle_s: float = 5.0, max_wait_s: float = 1.0):
        self.recorder, self.max_batch, self.max_pending = recorder, max_batch, max_pending
        self.gather_s, self.idle_s, self.max_wait_s = gather_s, idle_s, max_wait_s
        self.waiting: list = []  # (prepared, future, arrival) in arrival order
        self.last_event = 0.0  # the newest request's arrival, or the end of the last batch if later
        self.pending = 0  # waiting + being sampled
        self.closing = False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="agentgym-gateway", daemon=True)
        self.thread.start()

    def submit(self, prepared: Prepared) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self.cond:
            if self.pending >= self.max_pending:
                self.recorder.stats["refused_busy"] += 1
                raise RequestError(f"the gateway has {self.pending} requests waiting: retry later", status=429,
                                   code="rate_limit_exceeded", kind="requests")
            self.pending += 1
            self.last_event = time.monotonic()
            self.waiting.append((prepared, future, self.last_event))
            self.cond.notify()
        return future

    def _take(self) -> list:
        """This batch's requests, removed from `waiting` (the others wait for the next one)."""
        first = self.waiting[0][0]
        batch, seen, rest = [], set(), []
        for item in self.waiting:
            p = item[0]
            key = id(p.episode) if p.episode is not None else None
            if len(batch) < self.max_batch and p.sampling == first.sampling and (key is None or key not in seen):
                batch.append(item)
                seen.add(key)
            else:
                rest.append(item)
        self.waiting = rest
        return batch

    def _full(self) -> bool:
        """Whether no other request should be waited for (called holding `cond`)."""
        now = time.monotonic()
        if len(self.waiting) >= self.max_batch or self.closing or now - self.last_event >= self.gather_s \
                or now - self.waiting[0][2] >= self.max_wait_s:
            return True
        asking = {id(p.episode) for p, _, _ in self.waiting if p.episode is not None}
        return all(id(e) in asking for e in self.recorder.open_episodes() if now - e.active_at < self.idle_s)

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.waiting and not self.closing:
                    self.cond.wait()
                if not self.waiting:
                    return
                while not self._full():  # closes and time passing are not announced: look every few ms
                    self.cond.wait(timeout=0.005)
                batch = self._take()
            try:
                calls = self.recorder.generate([p for p, _, _ in batch])
                for (_, future, _), call in zip(batch, calls):
                    future.set_result(call)
            except BaseException as exc:  # surfaced to each caller as a 500
                for _, future, _ in batch:
                    if not future.done():
                        future.set_exception(exc)
            with self.cond:
                self.pending -= len(batch)
                self.last_event = time.monotonic()  # the episodes just answered have yet to step and ask

    def close(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify()
        self.thread.join(timeout=30)


def _choice_message(call: Call) -> dict:
    message = {"role": "assistant", "content": call.reply.content}
    if call.reply.tool_calls:
        message["tool_calls"] = call.reply.tool_calls
    return message


def _finish(call: Call) -> str:
    return "tool_calls" if call.reply.tool_calls else call.finish_reason


def _logprobs(call: Call, tokenizer) -> dict:
    return {"content": [{"token": tokenizer.decode([t]), "logprob": lp, "bytes": None, "top_logprobs": []}
                        for t, lp in zip(call.response_ids, call.response_logprobs)]}


def _usage(call: Call) -> dict:
    return {"prompt_tokens": len(call.prompt_ids), "completion_tokens": len(call.response_ids),
            "total_tokens": len(call.prompt_ids) + len(call.response_ids)}


def create_app(recorder: Recorder, cfg: GatewayConfig | None = None):
    """The Starlette app over `recorder` (its batcher thread starts with the app's lifespan)."""
    require("starlette", "web")
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    cfg = cfg or GatewayConfig()
    tokenizer = recorder.http_tokenizer
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app):
        state["batcher"] = Batcher(recorder, cfg.max_batch, cfg.max_pending, cfg.gather_s, cfg.idle_s, cfg.max_wait_s)
        try:
            yield
        finally:
            state["batcher"].close()

    def authorized(request) -> None:
        if cfg.api_key and request.headers.get("authorization") != f"Bearer {cfg.api_key}":
            raise RequestError("missing or wrong API key: send Authorization: Bearer <the gateway's --api-key>",
                               status=401, code="invalid_api_key")

    async def json_body(request, required: bool = True):
        chunks, size = [], 0
        async for chunk in request.stream():  # bounded as it is read (Guard refused a declared size over it)
            size += len(chunk)
            if size > cfg.max_body_bytes:
                raise too_large(cfg.max_body_bytes)
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw and not required:
            return {}
        body = parse_json(raw)
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        return body

    def handled(fn):
        async def endpoint(request):
            try:
                authorized(request)
                return await fn(request)
            except RequestError as exc:
                recorder.stats[f"refused_{exc.status}"] += 1
                return error_response(exc)
            except Exception as exc:  # a bug of ours: this client gets an error object, the others are served
                recorder.stats["server_errors"] += 1
                return error_response(RequestError(f"the gateway failed on this request: {type(exc).__name__}: "
                                                   f"{exc}".splitlines()[0][:300], status=500, kind="server_error"))
        return endpoint

    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                         "owned_by": "agentgym"} for name in recorder.model_names]})

    async def open_episode(request):
        body = await json_body(request, required=False)
        ep = recorder.open(body.get("group"), body.get("task_id", ""), body.get("metadata"))
        root = str(request.base_url).rstrip("/")
        return JSONResponse({"id": ep.id, "group": ep.group, "base_url": f"{root}/episodes/{ep.id}/v1"})

    async def reward(request):
        body = await json_body(request)
        if "reward" not in body:
            raise RequestError("the body must hold the episode's reward: {\"reward\": 1.0}", param="reward")
        ep = recorder.close(request.path_params["eid"], body["reward"], body.get("success"), body.get("step_rewards"),
                            body.get("states"), body.get("valid"))
        return JSONResponse({"id": ep.id, "closed": True, "calls": len(ep.calls), "splits": ep.splits})

    async def show_episode(request):
        return JSONResponse(recorder.episode(request.path_params["eid"], open_only=False).summary())

    async def layout(request):
        if recorder.layout is None:
            raise RequestError("this gateway serves a model, not a training run: it records any chat layout",
                               status=404, code="no_layout")
        return JSONResponse(recorder.layout)

    async def metrics(request):
        return JSONResponse({**recorder.stats, "version": recorder.version,
                             "open_episodes": sum(not e.closed for e in recorder.episodes.values()),
                             "pending": state["batcher"].pending})

    async def completions(request):
        eid = request.path_params.get("eid") or request.headers.get("x-episode-id")
        episode = recorder.episode(eid) if eid else None
        body = await json_body(request)
        prepared = await run_in_threadpool(recorder.prepare, body, episode)  # counts tokens: not on the event loop
        future = state["batcher"].submit(prepared)  # a RequestError (429) when too many wait
        try:
            call = await asyncio.wrap_future(future)
        except Exception as exc:  # the engine failed: the episode's other calls are kept
            recorder.stats["engine_errors"] += 1
            raise RequestError(f"the policy failed to sample: {type(exc).__name__}: {exc}".splitlines()[0],
                               status=500, kind="server_error") from None
        if not call.recorded:  # its episode's reward came while this call sampled
            raise RequestError(f"episode {eid!r} closed while this call was sampled", status=409, code="episode_closed")
        rid, created, model = "chatcmpl-" + uuid.uuid4().hex, int(time.time()), body["model"]
        if not prepared.stream:
            choice = {"index": 0, "message": _choice_message(call), "finish_reason": _finish(call),
                      "logprobs": _logprobs(call, tokenizer) if prepared.logprobs else None}
            return JSONResponse({"id": rid, "object": "chat.completion", "created": created, "model": model,
                                 "choices": [choice], "usage": _usage(call)})
        return StreamingResponse(_stream(call, prepared, rid, created, model), media_type="text/event-stream")

    async def _stream(call: Call, prepared: Prepared, rid: str, created: int, model: str):
        def chunk(delta: dict, finish=None, **extra) -> str:
            body = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]}
            return f"data: {json.dumps(body)}\n\n"

        complete = False
        try:
            yield chunk({"role": "assistant", "content": ""})
            if call.reply.tool_calls:
                if call.reply.content:
                    yield chunk({"content": call.reply.content})
                yield chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(call.reply.tool_calls)]})
            else:  # token by token, as the decoded text grows
                shown = ""
                for k in range(1, len(call.response_ids) + 1):
                    text = tokenizer.decode(call.response_ids[:k], skip_special_tokens=True)[:len(call.text)]
                    if len(text) > len(shown) and text.startswith(shown):
                        piece = text[len(shown):]
                        extra = {"logprobs": {"content": [{"token": tokenizer.decode([call.response_ids[k - 1]]),
                                                           "logprob": call.response_logprobs[k - 1], "bytes": None,
                                                           "top_logprobs": []}]}} if prepared.logprobs else {}
                        yield chunk({"content": piece}, **extra)
                        shown = text
                        await asyncio.sleep(0)
                if shown != call.text:
                    yield chunk({"content": call.text[len(shown):]})
            yield chunk({}, _finish(call))
            if prepared.include_usage:
                yield f"data: {json.dumps({'id': rid, 'object': 'chat.completion.chunk', 'created': created, 'model': model, 'choices': [], 'usage': _usage(call)})}\n\n"
            yield "data: [DONE]\n\n"
            complete = True
        finally:
            if not complete:  # the client went away mid-stream: the call stays recorded, marked
                call.delivered = False
                recorder.stats["disconnects"] += 1

    async def not_found(request, exc=None):
        return error_response(RequestError(f"no route {request.method} {request.url.path}: the gateway serves "
                                           "/v1/chat/completions, /v1/models and /episodes", status=404,
                                           code="unknown_url"))

    async def bad_method(request, exc=None):
        return error_response(RequestError(f"{request.method} is not allowed on {request.url.path}", status=405,
                                           code="method_not_allowed"))

    routes = []
    for prefix in ("", "/episodes/{eid}"):
        routes += [Route(prefix + "/v1/models", handled(models), methods=["GET"]),
                   Route(prefix + "/v1/chat/completions", handled(completions), methods=["POST"])]
    routes += [Route("/episodes", handled(open_episode), methods=["POST"]),
               Route("/episodes/{eid}/reward", handled(reward), methods=["POST"]),
               Route("/episodes/{eid}", handled(show_episode), methods=["GET"]),
               Route("/metrics", handled(metrics), methods=["GET"]),
               Route("/layout", handled(layout), methods=["GET"]),
               Route("/health", lambda request: JSONResponse({"ok": True}), methods=["GET"])]
    guard = Middleware(Guard, loopback_only=is_loopback(cfg.host), max_body_bytes=cfg.max_body_bytes,
                       stats=recorder.stats)
    return Starlette(routes=routes, lifespan=lifespan, middleware=[guard],
                     exception_handlers={404: not_found, 405: bad_method})


class RunningGateway:
    """A gateway served by uvicorn in a thread of this process (tests, training, benchmarks)."""

    def __init__(self, recorder: Recorder, cfg: GatewayConfig | None = None):
        import uvicorn

        self.cfg = cfg or GatewayConfig()
        check_host(self.cfg.host, self.cfg.allow_remote, "gateway")
        self.recorder = recorder
        config = uvicorn.Config(create_app(recorder, self.cfg), host=self.cfg.host, port=self.cfg.port,
                                log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="agentgym-gateway-http", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the gateway could not serve on {self.cfg.host}:{self.cfg.port} (port in use?)")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.cfg.host}:{port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def serve(recorder: Recorder, cfg: GatewayConfig, on_ready=None) -> None:
    """Serve in the foreground until interrupted."""
    import uvicorn

    check_host(cfg.host, cfg.allow_remote, "gateway")
    server = uvicorn.Server(uvicorn.Config(create_app(recorder, cfg), host=cfg.host, port=cfg.port,
                                           log_level="warning", lifespan="on"))
    if on_ready is not None:
        import contextlib

        original = server.startup

        async def startup(sockets=None):
            await original(sockets)
            on_ready()
        server.startup = startup  # type: ignore[method-assign]
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
    else:
        server.run()
