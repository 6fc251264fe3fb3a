"""OpenAIPolicy: any OpenAI-compatible chat endpoint (vLLM's server, SGLang, a hosted API) as a Policy.

One POST to `{base_url}/chat/completions` per prompt, at most `max_concurrency` in flight.
Transient failures -- timeouts, connection errors, HTTP 429 and 5xx, a body that is not valid
JSON (a cut connection) -- are retried `max_retries` times with exponential backoff and full
jitter (honouring Retry-After). What is still failing after that, and permanent errors (other
4xx, a response without choices), come back as `Completion(error=...)`: the rollout marks that
episode `infra_error`, so an outage never looks like a zero-reward episode.

Token ids and logprobs, where the server gives them:
- `logprobs=True` asks for the logprob of each sampled token (`logprobs: true, top_logprobs: 0`).
  The policy then *requires* them: a response without logprobs raises MissingLogprobsError
  (the server cannot give what training needs; retrying would not help).
- `return_token_ids=True` (vLLM extension) also asks for `prompt_token_ids` and the choice's
  `token_ids`, and for `return_tokens_as_token_ids` so logprob entries are `token_id:N` and
  the response ids can be read from them too. Servers that reject unknown fields (the
  OpenAI API) need it off, the default.
vLLM's server reports raw (temperature-1, unfiltered) logprobs by default (`--logprobs-mode
raw_logprobs`), the same quantity HFPolicy and VLLMPolicy record.

Truncated replies keep `finish_reason="length"`; the reply text is kept as the server sent it.
"""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentgym.errors import AgentGymError, ConfigError, require
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext

RETRY_STATUS = {408, 425, 429}  # and every 5xx


class MissingLogprobsError(AgentGymError):
    """The server answered without the logprobs this policy was asked to return."""


class _Retryable(Exception):
    """A failure worth another try (transient on the server or the network)."""


class OpenAIPolicy:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 4,
        logprobs: bool = False,
        return_token_ids: bool = False,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        extra_body: dict[str, Any] | None = None,
        seed: int = 0,
    ):
        """base_url: the API root, e.g. http://127.0.0.1:8000/v1. timeout: seconds per request
        (connect, read, write each). max_retries: extra attempts after the first. extra_body:
        fields added to every request (server-specific options)."""
        httpx = require("httpx", "openai")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url {base_url!r} must start with http:// or https://")
        if max_concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise ConfigError("OpenAIPolicy needs max_concurrency >= 1, max_retries >= 0 and timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_concurrency = int(max_concurrency)
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.extra_body = dict(extra_body or {})
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout),
            headers=headers,
            limits=httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="agentgym-openai")
        self._jitter = random.Random(seed)
        self._jitter_lock = threading.Lock()
        self._seed_rng = random.Random(seed)
        self._last_seed: int | None = None
        self.stats = {"requests": 0, "retries": 0, "errors": 0}
        self._stats_lock = threading.Lock()

    # --- requests -------------------------------------------------------------------------
    def _body(self, messages: Messages, sampling: SamplingParams, seed: int | None) -> dict:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": int(sampling.max_new_tokens),
            "temperature": max(float(sampling.temperature), 0.0),
            "top_p": float(sampling.top_p),
        }
        if sampling.top_k and sampling.top_k > 0:
            body["top_k"] = int(sampling.top_k)  # not OpenAI's, but vLLM and SGLang read it
        if seed is not None:
            body["seed"] = seed
        if self.logprobs:
            body.update(logprobs=True, top_logprobs=0)
        if self.return_token_ids:
            body.update(return_token_ids=True, return_tokens_as_token_ids=True)
        body.update(self.extra_body)
        return body

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        with self._jitter_lock:
            delay = self._jitter.uniform(0, min(self.backoff_max, self.backoff_base * 2 ** attempt))
        if retry_after:
            try:
                delay = max(delay, min(float(retry_after), self.backoff_max))
            except ValueError:
                pass
        return delay

    def _post_once(self, body: dict) -> dict:
        httpx = self._httpx
        try:
            response = self._client.post(f"{self.base_url}/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out after {self.timeout:g}s ({type(exc).__name__})") from None
        except httpx.TransportError as exc:  # refused, reset, DNS, protocol errors
            raise _Retryable(f"connection failed: {type(exc).__name__}: {exc}") from None
        if response.status_code in RETRY_STATUS or response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code}: {response.text[:200]}",
                             response.headers.get("retry-after"))
        if response.status_code >= 400:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _Retryable(f"invalid JSON in the response ({len(response.content)} bytes)") from None
        if not isinstance(data, dict) or not data.get("choices"):
            raise RuntimeError(f"response has no choices: {str(data)[:200]}")
        return data

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _request(self, messages: Messages, sampling: SamplingParams, seed: int | None) -> Completion:
        body = self._body(messages, sampling, seed)
        last = ""
        for attempt in range(self.max_retries + 1):
            self._count("requests")
            try:
                return self._parse(self._post_once(body))
            except _Retryable as exc:
                last = str(exc.args[0])
                if attempt == self.max_retries:
                    break
                self._count("retries")
                time.sleep(self._backoff(attempt, exc.args[1] if len(exc.args) > 1 else None))
            except RuntimeError as exc:  # permanent: retrying would get the same answer
                self._count("errors")
                return Completion("", finish_reason="error", error=f"{self.base_url}: {exc}")
        self._count("errors")
        return Completion("", finish_reason="error",
                          error=f"{self.base_url}: failed after {self.max_retries + 1} attempts: {last}")

    # --- responses ------------------------------------------------------------------------
    def _parse(self, data: dict) -> Completion:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        calls = message.get("tool_calls")
        if calls and not text:  # tool-call servers: hand the parser the calls in OpenAI's own JSON form
            text = json.dumps(calls)
        finish = choice.get("finish_reason") or "stop"
        finish = "length" if finish == "length" else "stop"
        entries = ((choice.get("logprobs") or {}).get("content")) or None
        response_logprobs = [float(e["logprob"]) for e in entries] if entries else None
        if self.logprobs and response_logprobs is None:
            raise MissingLogprobsError(
                f"{self.base_url} returned no logprobs for model {self.model!r}; training needs them: serve the "
                "model with vLLM (or another server that returns logprobs) or use OpenAIPolicy(logprobs=False) "
                "for evaluation only")
        response_ids = choice.get("token_ids")
        if response_ids is None and entries and all(str(e.get("token", "")).startswith("token_id:") for e in entries):
            response_ids = [int(str(e["token"]).split(":", 1)[1]) for e in entries]
        if response_ids is not None and response_logprobs is not None and len(response_ids) != len(response_logprobs):
            raise RuntimeError(f"{len(response_ids)} token ids but {len(response_logprobs)} logprobs")
        return Completion(text=text, prompt_ids=data.get("prompt_token_ids"),
                          response_ids=list(response_ids) if response_ids is not None else None,
                          response_logprobs=response_logprobs, finish_reason=finish)

    # --- Policy ---------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        self._seed_rng = random.Random(int(seed))
        self._last_seed = int(seed)

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        sampling = sampling or SamplingParams()
        if sampling.seed is not None and sampling.seed != self._last_seed:
            self.reseed(sampling.seed)
        # Per-request seeds from our own stream: reproducible where the server honours `seed`,
        # and two copies of one prompt (a GRPO group) still get different samples.
        seeds = [self._seed_rng.randrange(2**31) if sampling.seed is not None else None for _ in prompts]
        futures = [self._pool.submit(self._request, m, sampling, s) for m, s in zip(prompts, seeds)]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

    def __enter__(self) -> "OpenAIPolicy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
