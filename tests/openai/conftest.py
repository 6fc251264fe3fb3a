"""A scripted OpenAI-compatible server on 127.0.0.1 (Starlette + uvicorn in a thread).

The URL path carries the script: `{base}/<key>/<a,b,c>/v1` answers the 1st request for that key
with behaviour a, the 2nd with b, and so on (the last one repeats). Behaviours: ok, length,
nologprobs, 429, 500, 503, 400, truncated (cut JSON), hang (answers after 3 s), slow (after 0.3 s),
empty (no choices). `max_inflight[key]` records the most requests of a key the server held at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import defaultdict

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reply(body: dict, finish: str = "stop", logprobs: bool = True) -> dict:
    words = ["<action>inc</action>"]
    choice = {"index": 0, "message": {"role": "assistant", "content": words[0]}, "finish_reason": finish}
    if logprobs and body.get("logprobs"):
        choice["logprobs"] = {"content": [{"token": "token_id:7", "logprob": -0.25, "top_logprobs": []},
                                          {"token": "token_id:9", "logprob": -0.5, "top_logprobs": []}]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


class ScriptedServer:
    def __init__(self):
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        self.counts: dict[str, int] = defaultdict(int)
        self.bodies: list[dict] = []
        self.inflight: dict[str, int] = defaultdict(int)
        self.max_inflight: dict[str, int] = defaultdict(int)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"

        async def chat(request):
            key, script = request.path_params["key"], request.path_params["script"].split(",")
            body = await request.json()
            self.bodies.append(body)
            n = self.counts[key]
            self.counts[key] += 1
            action = script[min(n, len(script) - 1)]
            if action in ("429", "500", "503", "400"):
                headers = {"Retry-After": "0"} if action == "429" else {}
                return JSONResponse({"error": {"message": f"scripted {action}"}}, status_code=int(action),
                                    headers=headers)
            if action == "truncated":
                return Response(json.dumps(_reply(body))[:40], media_type="application/json")
            if action in ("hang", "slow"):
                self.inflight[key] += 1
                self.max_inflight[key] = max(self.max_inflight[key], self.inflight[key])
                await asyncio.sleep(3.0 if action == "hang" else 0.3)
                self.inflight[key] -= 1
            if action == "empty":
                return JSONResponse({"id": "x", "choices": []})
            finish = "length" if action == "length" else "stop"
            return JSONResponse(_reply(body, finish=finish, logprobs=action != "nologprobs"))

        app = Starlette(routes=[Route("/{key}/{script}/v1/chat/completions", chat, methods=["POST"])])
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("scripted server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def url(self, key: str, script: str) -> str:
        return f"{self.base}/{key}/{script}/v1"


@pytest.fixture(scope="module")
def scripted_server():
    with ScriptedServer() as server:
        yield server
