"""Episodes of a user's agent program, recorded token for token (no HTTP here: app.py serves it).

Every call of an episode is one `Call`: the exact prompt ids, the sampled ids and their logprobs,
the weights' version. Across calls the conversation is continued at the token level by
`agentgym.continuation.TokenContinuation` (the rollout's own code): a client re-sends the whole
conversation as text, and where it is the previous call's messages + the reply the gateway sampled
+ new messages, the new prompt is the previous ids + the sampled ids + the template's ids of what
follows. Where the client changed anything before that (trimmed the history, rewrote a tool
result or the reply, a windowed prompt), the episode goes on in a new sample (`Call.sample`
counts up, `Recorder.stats["splits"]`): its steps are then trained as separate sequences, each in
the exact context it was sampled in, never merged with a context the model did not see.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentgym.chat_template import render_chat
from agentgym.continuation import TokenContinuation
from agentgym.errors import ConfigError
from agentgym.integrations.gateway.chat_format import (Reply, RequestError, check_tools, parse_reply,
                                                       template_messages)
from agentgym.policies.base import SamplingParams, TurnContext
from agentgym.trajectory import Step, Trajectory

# parameters a request may carry and the gateway ignores (they change nothing it samples)
IGNORED = {"user", "metadata", "store", "parallel_tool_calls", "stream_options", "service_tier", "prompt_cache_key"}
# |reward| and |step reward| above this are refused: the estimators square and sum them (1e308 overflows
# to inf there, as NaN and Infinity would), and no scored outcome needs more
REWARD_LIMIT = 1e6
SAMPLING = {"model", "messages", "tools", "tool_choice", "stream", "n", "max_tokens", "max_completion_tokens",
            "temperature", "top_p", "seed", "stop", "logprobs", "top_logprobs", "presence_penalty",
            "frequency_penalty"}


@dataclass
class Call:
    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    text: str  # the decoded reply as sampled, up to a stop string
    reply: Reply  # what the client was sent (content and tool calls)
    finish_reason: str
    sample: int  # which token sequence of the episode this call continues (a split starts the next)
    policy_version: int | None
    messages: list[dict]  # the prompt as the template rendered it
    seconds: float = 0.0
    delivered: bool = True  # False: the client went away while it was streamed
    recorded: bool = True  # False: the episode's reward came while it sampled (the client gets 409)


@dataclass
class Episode:
    id: str
    group: str
    task_id: str = ""
    calls: list[Call] = field(default_factory=list)
    closed: bool = False
    reward: float = 0.0
    success: bool | None = None
    step_rewards: list[float] | None = None
    states: list[str] | None = None
    valid: list[bool] | None = None  # per call: whether the program could use the reply (invalid actions)
    splits: int = 0
    metadata: dict = field(default_factory=dict)  # the program's own, kept apart from the trainer's keys
    active_at: float = field(default_factory=time.monotonic)  # opened, last answered or closed (Batcher: idle_s)

    def summary(self) -> dict:
        return {"id": self.id, "group": self.group, "task_id": self.task_id, "closed": self.closed,
                "reward": self.reward, "success": self.success, "splits": self.splits,
                "samples": (self.calls[-1].sample + 1) if self.calls else 0,
                "calls": [{"prompt_ids": c.prompt_ids, "response_ids": c.response_ids,
                           "response_logprobs": c.response_logprobs, "text": c.text, "sample": c.sample,
                           "finish_reason": c.finish_reason, "policy_version": c.policy_version,
                           "delivered": c.delivered} for c in self.calls]}


@dataclass
class Prepared:
    """One checked request, ready to be sampled."""

    episode: Episode | None
    messages: list[dict]
    tools: list[dict]  # the tools whose calls the reply may return (tool_choice applied)
    sampling: SamplingParams
    stop: list[str]
    logprobs: bool
    stream: bool
    include_usage: bool


def _number(body: dict, name: str, low: float, high: float, default):
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(f"{name} must be a number in [{low}, {high}], got {value!r}", param=name)
    return value


def _reward(value, name: str) -> float:
    """A reported reward: a finite number within REWARD_LIMIT (NaN, Infinity, 1e308 would end training)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or abs(value) > REWARD_LIMIT:
        raise RequestError(f"{name} must be a finite number within +-{REWARD_LIMIT:g}, got {value!r}", param=name)
    return float(value)


def _flag(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise RequestError(f"{name} must be true or false, got {value!r}", param=name)
    return bool(value)


def _same_reply(message: dict, reply: Reply) -> bool:
    """Whether a client's assistant message is the reply the gateway sent (content and tool calls)."""
    if message.get("role") != "assistant" or (message.get("content") or "") != (reply.content or ""):
        return False
    sent = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in reply.tool_calls]
    got = [(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
           for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    return sent == got


class Recorder:
    """The gateway's state: episodes, their calls, and the one TokenContinuation that continues them.

    engine: a token-level policy (HFPolicy, a vLLM engine: `generate_ids`, `encode_prompt`,
    `tokenizer`). `lock` is held while sampling; the trainer holds it during an update so that no
    call samples from weights being changed (calls wait). `version`: the weights' version (updates
    applied), stamped on every call unless the engine is a rollout copy that knows its own.
    heldout_tasks: task ids (and content keys) an episode may not name; layout: the chat layout a
    training run's policy is trained on (GET /layout), None when serving a model."""

    def __init__(self, engine: Any, model_names: tuple[str, ...] = ("agentgym",), context_len: int | None = None,
                 default_max_tokens: int = 256, heldout_tasks: frozenset[str] = frozenset(),
                 layout: dict | None = None):
        self.engine = engine
        self.model_names = tuple(model_names)
        self.context_len = context_len
        self.default_max_tokens = default_max_tokens
        self.continuation = TokenContinuation(engine, on_mismatch="per-turn")
        # the HTTP thread's own tokenizer (streamed pieces): a fast tokenizer is not safe to share
        # with the thread that samples
        self.http_tokenizer = copy.deepcopy(engine.tokenizer)
        # and one for the length checks, which run in worker threads (one at a time: `_count_lock`)
        self._count_tokenizer = copy.deepcopy(engine.tokenizer)
        self._count_lock = threading.Lock()
        self.heldout_tasks = frozenset(heldout_tasks)  # ids an episode may not name (training mode)
        self.layout = layout  # the chat layout the policy is trained on (GET /layout), when known
        self.episodes: dict[str, Episode] = {}
        self.closed_order: list[str] = []  # episodes in the order their reward came
        self._open: dict[str, None] = {}  # ids of the open episodes (an ordered set)
        self.lock = threading.Lock()
        self.changed = threading.Condition()  # notified when an episode closes
        self.version = 0
        self.stats: Counter = Counter()
        self._anonymous = itertools.count()

    # --- episodes ---------------------------------------------------------------------------
    def open(self, group: str | None = None, task_id: str = "", metadata: dict | None = None) -> Episode:
        """A new episode. group: the episodes compared with each other (default: its own id);
        task_id: refused when it names a held-out task; metadata: any JSON object, kept with it."""
        for name, value in (("group", group), ("task_id", task_id)):
            if value is None:
                continue
            if not isinstance(value, str) or len(value) > 256:
                shown = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
                raise RequestError(f"{name} must be a string of at most 256 characters, got {shown}", param=name)
        if metadata is not None and not isinstance(metadata, dict):
            raise RequestError(f"metadata must be a JSON object, got {type(metadata).__name__}", param="metadata")
        if task_id and task_id in self.heldout_tasks:
            self.stats["refused_heldout"] += 1
            raise RequestError(f"task {task_id!r} is held out for evaluation: the trainer never trains on it; "
                               "play a training task", param="task_id", code="heldout_task")
        eid = uuid.uuid4().hex[:16]
        ep = Episode(id=eid, group=group or eid, task_id=task_id or "", metadata=dict(metadata or {}))
        self.episodes[eid] = ep
        self._open[eid] = None
        self.stats["episodes_opened"] += 1
        return ep

    def open_episodes(self) -> list[Episode]:
        """The episodes whose reward has not come yet (whose programs may still call)."""
        return [self.episodes[eid] for eid in list(self._open)]

    def episode(self, eid: str, open_only: bool = True) -> Episode:
        ep = self.episodes.get(eid)
        if ep is None:
            raise RequestError(f"episode {eid!r} was never opened: POST /episodes first", status=404,
                               code="episode_not_found", param="episode")
        if open_only and ep.closed:
            raise RequestError(f"episode {eid!r} is closed (its reward was reported): open a new one", status=409,
                               code="episode_closed", param="episode")
        return ep

    def close(self, eid: str, reward: float, success: bool | None = None, step_rewards: list | None = None,
              states: list | None = None, valid: list | None = None) -> Episode:
        """Report an episode's reward: it closes, and training mode may take it into a batch. Its
        calls are counted and it is closed in one step under `changed` (`generate` records a call
        under it too): a call still sampling when the reward comes is refused, never appended."""
        reward = _reward(reward, "reward")
        if success is not None and not isinstance(success, bool):
            raise RequestError("success must be true or false", param="success")
        with self.changed:
            ep = self.episode(eid)
            n = len(ep.calls)
            for name, values, kind in (("step_rewards", step_rewards, "numbers"), ("states", states, "strings"),
                                       ("valid", valid, "booleans")):
                ok = {"numbers": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                      "strings": lambda v: isinstance(v, str), "booleans": lambda v: isinstance(v, bool)}[kind]
                if values is not None and (not isinstance(values, list) or len(values) != n
                                           or not all(map(ok, values))):
                    raise RequestError(f"{name} must be a list of {n} {kind} (one per call of the episode)", param=name)
            if step_rewards is not None:
                step_rewards = [_reward(r, f"step_rewards[{k}]") for k, r in enumerate(step_rewards)]
            ep.reward, ep.success = reward, success
            ep.active_at = time.monotonic()
            ep.step_rewards = step_rewards
            ep.states = list(states) if states is not None else None
            ep.valid = list(valid) if valid is not None else None
            ep.closed = True
            self._open.pop(eid, None)
            self.closed_order.append(eid)
            self.stats["episodes_closed"] += 1
            self.changed.notify_all()
        self.continuation.forget([self._key(ep)])
        return ep

    # --- requests ---------------------------------------------------------------------------
    def prepare(self, body: Any, episode: Episode | None) -> Prepared:
        """Check a /chat/completions body (OpenAI's names and ranges) and render its messages."""
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        unknown = sorted(set(body) - SAMPLING - IGNORED)
        if unknown:
            raise RequestError(f"unsupported parameter(s): {', '.join(unknown)}", param=unknown[0],
                               code="unsupported_parameter")
        if body.get("model") not in self.model_names:
            raise RequestError(f"the model {body.get('model')!r} does not exist: this gateway serves "
                               f"{', '.join(self.model_names)}", status=404, param="model", code="model_not_found")
        if body.get("n", 1) != 1:
            raise RequestError("n must be 1: open one episode per sample instead", param="n", code="unsupported_value")
        for name in ("presence_penalty", "frequency_penalty"):
            if body.get(name) not in (None, 0, 0.0):
                raise RequestError(f"{name} is not supported (it would change the policy being trained)", param=name,
                                   code="unsupported_value")
        if body.get("top_logprobs"):
            raise RequestError("top_logprobs is not supported (logprobs=true gives the sampled tokens' logprobs)",
                               param="top_logprobs", code="unsupported_value")
        tools = check_tools(body.get("tools"))
        choice = body.get("tool_choice")
        if choice is not None and choice not in ("auto", "none", "required") and not (
                isinstance(choice, dict) and isinstance(choice.get("function"), dict) and
                choice["function"].get("name") in {t["function"]["name"] for t in tools}):
            raise RequestError("tool_choice must be 'auto', 'none', 'required' or an offered function",
                               param="tool_choice")
        raw = body.get("messages")
        messages = template_messages(raw, tools, choice)
        if episode is not None:
            self._as_sampled(raw, messages, episode)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is None:
            max_tokens = self.default_max_tokens
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise RequestError("max_tokens must be a positive integer", param="max_tokens")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
            raise RequestError("stop must be a string or a list of at most 4 non-empty strings", param="stop")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise RequestError("seed must be an integer", param="seed")
        sampling = SamplingParams(temperature=float(_number(body, "temperature", 0, 2, 1.0)),
                                  top_p=float(_number(body, "top_p", 0, 1, 1.0)), max_new_tokens=max_tokens, seed=seed)
        if sampling.top_p <= 0:
            raise RequestError("top_p must be above 0", param="top_p")
        self._check_length(messages, max_tokens)
        # the calls a reply may make: none with tool_choice "none", only the named function's with one
        callable_tools = [] if choice == "none" else [t for t in tools if not isinstance(choice, dict) or
                                                       t["function"]["name"] == choice["function"]["name"]]
        options = body.get("stream_options") or {}
        if not isinstance(options, dict):
            raise RequestError("stream_options must be an object: {\"include_usage\": true}", param="stream_options")
        return Prepared(episode, messages, callable_tools, sampling, stop, _flag(body, "logprobs"),
                        _flag(body, "stream"), _flag(options, "include_usage"))

    def _as_sampled(self, raw: list, messages: list[dict], episode: Episode) -> None:
        """Render each assistant message that is a reply this episode was sent as the text sampled."""
        offset = len(messages) - len(raw)  # a tools system message inserted first
        for i, m in enumerate(raw):
            if isinstance(m, dict) and m.get("role") == "assistant":
                for call in reversed(episode.calls):
                    if _same_reply(m, call.reply):
                        messages[i + offset] = {"role": "assistant", "content": call.text}
                        break

    def _check_length(self, messages: list[dict], max_tokens: int) -> None:
        if not self.context_len:
            return
        if max_tokens >= self.context_len:
            raise RequestError(f"max_tokens={max_tokens} does not fit the model's context of {self.context_len} tokens",
                               param="max_tokens", code="context_length_exceeded")
        # tokens, counted: a character can be several (an emoji is 4 byte-level tokens)
        with self._count_lock:
            try:  # the model's template, bounded in work and size as every render is (agentgym/chat_template.py)
                text = render_chat(self._count_tokenizer, messages)
            except ConfigError as exc:  # the template refused these messages: this client's request, not the run
                raise RequestError(str(exc), param="messages", code="invalid_messages") from None
            n = len(self._count_tokenizer(text, add_special_tokens=False)["input_ids"])
        if n + max_tokens > self.context_len:
            raise RequestError(f"this model's maximum context length is {self.context_len} tokens; the messages have "
                               f"{n} and max_tokens is {max_tokens}: shorten the messages or max_tokens",
                               param="messages", code="context_length_exceeded")

    # --- sampling ---------------------------------------------------------------------------
    def _key(self, ep: Episode) -> str:
        return "episode-" + ep.id

    def _continues(self, ep: Episode, messages: list[dict]) -> bool:
        """Whether `messages` are the previous call's prompt + the reply sampled for it + new ones."""
        previous = self.continuation.contexts.get(self._key(ep))
        if previous is None or not ep.calls:
            return False
        before = previous[0]
        return (len(messages) > len(before) and messages[:len(before)] == before
                and messages[len(before)] == {"role": "assistant", "content": ep.calls[-1].text})

    def generate(self, batch: list[Prepared]) -> list[Call]:
        """Sample every request of `batch` in one engine call (same sampling parameters, distinct
        episodes: app.py groups them so); holds `lock`."""
        with self.lock:
            t0 = time.perf_counter()
            if callable(sync := getattr(self.engine, "sync", None)):
                sync()  # the engine's one weight path: a rollout copy or vLLM takes the newest weights
            keys, samples = [], []
            for p in batch:
                if p.episode is None:
                    keys.append(f"anonymous-{next(self._anonymous)}")
                    samples.append(0)
                    continue
                ep, key = p.episode, self._key(p.episode)
                keys.append(key)
                split = bool(ep.calls) and not self._continues(ep, p.messages)
                if split:
                    self.continuation.contexts.pop(key, None)  # the client changed the past: a new sample
                    ep.splits += 1
                    self.stats["splits"] += 1
                samples.append(ep.calls[-1].sample + split if ep.calls else 0)
            before = dict(self.continuation.retokenized)
            contexts = [TurnContext(episode=k, task=None, turn=0) for k in keys]  # type: ignore[arg-type]
            completions = self.continuation.generate([p.messages for p in batch], batch[0].sampling, contexts)
            self.stats["batches"] += 1  # calls / batches: how many requests one engine call sampled
            version = getattr(self.engine, "synced_version", None)
            version = self.version if version is None else version
            seconds = (time.perf_counter() - t0) / max(len(batch), 1)
            calls = []
            for p, key, sample, c in zip(batch, keys, samples, completions):
                if c.error is not None or c.response_ids is None:
                    raise RuntimeError(f"the engine failed: {c.error}")
                if self.continuation.retokenized.get(key, 0) > before.get(key, 0):  # the template rewrote the past
                    p.episode.splits += 1
                    self.stats["splits"] += 1
                    sample += 1
                ids, logprobs, text, finish = self._cut_at_stop(list(c.response_ids), list(c.response_logprobs or []),
                                                                c.text, c.finish_reason, p.stop)
                if len(ids) < len(c.response_ids):  # the context continues after the kept ids only
                    messages = self.continuation.contexts[key][0]
                    self.continuation.contexts[key] = (messages, list(c.prompt_ids) + ids, False)
                call = Call(prompt_ids=list(c.prompt_ids), response_ids=ids, response_logprobs=logprobs, text=text,
                            reply=parse_reply(text, p.tools), finish_reason=finish, sample=sample,
                            policy_version=version, messages=p.messages, seconds=seconds)
                if p.episode is None:
                    self.continuation.forget([key])
                else:
                    with self.changed:  # as `close` counts the calls: a closed episode takes none
                        if p.episode.closed:
                            call.recorded = False
                            self.stats["refused_after_close"] += 1
                            self.continuation.forget([key])
                        else:
                            p.episode.calls.append(call)
                            p.episode.active_at = time.monotonic()
                self.stats["calls"] += 1
                self.stats["prompt_tokens"] += len(call.prompt_ids)
                self.stats["completion_tokens"] += len(ids)
                calls.append(call)
            return calls

    def _cut_at_stop(self, ids, logprobs, text, finish, stop):
        """OpenAI's `stop`: the reply ends before the first stop string; the ids are cut after the
        token that completed it (what was sampled up to there, so the context stays exact)."""
        if not stop or not any(s in text for s in stop):
            return ids, logprobs, text, finish
        decode = self.engine.tokenizer.decode
        for k in range(1, len(ids) + 1):
            part = decode(ids[:k], skip_special_tokens=True)
            hits = [part.index(s) for s in stop if s in part]
            if hits:
                return ids[:k], logprobs[:k], part[:min(hits)], "stop"
        return ids, logprobs, text, finish

    # --- what the trainer takes -------------------------------------------------------------
    def trajectory(self, ep: Episode) -> Trajectory:
        """An episode as the trainer's Trajectory: one step per call, the reported reward as its
        score (and success unless reported), the step rewards, states (GiGPO's anchors) and
        validity (the invalid-action penalty) when given."""
        steps = []
        for k, c in enumerate(ep.calls):
            # no states reported: each step its own anchor, so GiGPO's step term is 0 (not one big group)
            steps.append(Step(observation="", anchor=ep.states[k] if ep.states else f"{ep.id}:{k}", text=c.text,
                              action=c.text, action_valid=ep.valid[k] if ep.valid else True,
                              reward=ep.step_rewards[k] if ep.step_rewards else 0.0,
                              prompt_ids=list(c.prompt_ids), response_ids=list(c.response_ids),
                              response_logprobs=list(c.response_logprobs), policy_version=c.policy_version))
        success = ep.success if ep.success is not None else ep.reward > 0
        return Trajectory(task_id=ep.task_id or ep.group, group_id=ep.group, env_id="gateway", steps=steps,
                          success=success, score=ep.reward, terminated=True,
                          metadata={"episode": ep.id, "splits": ep.splits,  # the trainer reads its own keys:
                                    **({"client": ep.metadata} if ep.metadata else {})})  # the program's apart
