"""Token in, token out: growing conversations continued at the token level.

With `history="full"` an episode is one conversation that only grows. Re-rendering it from text
each turn would re-tokenize the model's replies, and a sampled id sequence is often not the
tokenizer's own spelling of its text (an untrained model's id 233 comes back as [178, 130, 128]),
so the episode could not be trained as one sequence and a reply would be scored in a context
other than the one it was sampled in. Instead the context of turn k is

    context(k-1) + the reply's ids as sampled + the template's ids for what follows the reply
    (end of the assistant turn, the new user message, the next generation prompt)

where the last part is the chat template's rendering of turn k minus its rendering of turn k-1,
tokenized on its own. The same code serves every engine (HF, vLLM, Ray replicas) and TRL's
adapter. An engine that can reuse its KV cache (HFPolicy) is told which conversation each prompt
continues, so only the new tokens are prefilled, and which conversation a tree rollout's branch
forks from (`fork`), so its first prompt, its parent's, is not prefilled again.

A template whose rendering of turn k does not extend its rendering of turn k-1 (some strip earlier
reasoning, some re-space) cannot give one sequence: with on_mismatch="error" (the default) the
first such turn raises one line naming the template and the first differing character; with
"per-turn" that turn is re-rendered from text, the episode goes on in a new sequence, and the
trajectory counts it (metadata["retokenized_turns"]).

Windowed layouts (history=k, memory) render a new prompt each turn, but consecutive prompts of an
episode still share a prefix (template, instruction, task line). `CachedPrompts` tells a caching
engine which episode each prompt belongs to, so the part it shares with the episode's previous
turn is not prefilled again (the main job's prompts: 27% fewer prefilled tokens).
"""

from __future__ import annotations

import inspect
import itertools
import warnings
from typing import Any

from agentgym.errors import ConfigError
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext
from agentgym.chat_template import render_chat

ON_MISMATCH = ("error", "per-turn")
_instances = itertools.count()


class TemplateMismatch(ConfigError):
    """The chat template rewrites earlier turns: an episode is not one growing token sequence."""


def check_chat_template(tokenizer: Any) -> None:
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ConfigError(f"the tokenizer of {name!r} has no chat template: set tokenizer.chat_template (or use "
                          "an instruct model's tokenizer) so that conversations can be rendered")


def supports_tokens(policy: Any) -> bool:
    """Whether a policy generates from token ids (LLM engines) rather than from messages only."""
    return callable(getattr(policy, "generate_ids", None)) and callable(getattr(policy, "encode_prompt", None)) \
        and getattr(policy, "tokenizer", None) is not None


def constrains_replies(policy: Any) -> bool:
    """Whether a token-level engine can decode within given replies (HFPolicy's allowed_replies)."""
    return supports_tokens(policy) and "allowed_replies" in inspect.signature(policy.generate_ids).parameters


class AdmissibleReplies:
    """The replies a turn may give with `SamplingParams.admissible_only`: per prompt, the token ids
    of each admissible action in the env's action format, then the end of the turn, as SFT encodes
    its targets (`encode_response`); each text encoded once."""

    def __init__(self, policy: Any):
        self.policy = policy
        self._ids: dict[str, list[int]] = {}
        # episode -> turns decoded freely because the env listed no admissible action then
        # (rollout puts it in the trajectory's metadata["free_turns"], training in rollout/free_turns)
        self.free_turns: dict[str, int] = {}
        self._warned = False

    def __call__(self, contexts: list[TurnContext]) -> list[list[list[int]] | None]:
        replies: list[list[list[int]] | None] = []
        for ctx in contexts:
            actions = ctx.info.get("admissible_actions")
            if actions is None:
                raise ConfigError(f"admissible_only decoding: the env of task {ctx.task.task_id!r} lists no admissible "
                                  "actions (an open action space): set rollout.admissible_only=false for it")
            if not actions:
                # Nothing to choose from: this turn is decoded freely, said once and counted, never silently.
                self.free_turns[ctx.episode] = self.free_turns.get(ctx.episode, 0) + 1
                if not self._warned:
                    self._warned = True
                    warnings.warn(f"admissible_only decoding: task {ctx.task.task_id!r} listed no admissible action at "
                                  "a turn, which is decoded freely instead (counted in rollout/free_turns)",
                                  RuntimeWarning, stacklevel=2)
                replies.append(None)
                continue
            texts = [ctx.format_action(a) if ctx.format_action is not None else str(a) for a in actions]
            for text in texts:
                if text not in self._ids:
                    self._ids[text] = list(self.policy.encode_response(text, add_eos=True))
            replies.append([self._ids[text] for text in texts])
        return replies

    def options(self, sampling: SamplingParams | None, contexts: list[TurnContext] | None) -> dict:
        """generate_ids' keyword for this turn: {} unless sampling asks for admissible replies."""
        if sampling is None or not sampling.admissible_only:
            return {}
        if contexts is None:
            raise ValueError("admissible_only decoding needs the rollout's TurnContexts (the env's admissible actions)")
        return {"allowed_replies": self(contexts)}


class TokenContinuation:
    """A Policy for one rollout of growing conversations over a token-level `policy`.

    Keeps, per episode (TurnContext.episode), the messages of its last prompt and the exact ids
    of that prompt plus the sampled reply. `close()` releases the engine's cached prefixes."""

    def __init__(self, policy: Any, on_mismatch: str = "error"):
        if on_mismatch not in ON_MISMATCH:
            raise ConfigError(f"on_template_mismatch must be one of {', '.join(ON_MISMATCH)}, got {on_mismatch!r}")
        self.policy = policy
        self.tok = policy.tokenizer
        check_chat_template(self.tok)
        self.on_mismatch = on_mismatch
        self.contexts: dict[str, tuple[list, list[int], bool]] = {}  # episode -> (messages, ids, ended with eos)
        self.retokenized: dict[str, int] = {}  # episode -> turns re-rendered from text (per-turn fallback)
        self._key = f"continuation-{next(_instances)}:"  # cache keys unique to this rollout
        self._caches = "cache_keys" in inspect.signature(policy.generate_ids).parameters  # KV reuse (HFPolicy)
        self.replies = AdmissibleReplies(policy)
        self.starts: dict[str, tuple[list, list[int]]] = {}  # branch episode -> (first prompt, its ids)
        self.forked: set[str] = set()  # branch episodes whose cache key the engine forked (released at close)

    def start_from(self, episode: str, messages: list, prompt_ids: list[int]) -> None:
        """Tree rollouts: `episode` branches from a parent's turn whose prompt was `messages`, sent
        as `prompt_ids`; its first turn uses those ids as they are, so the branch continues the
        parent's exact token prefix (sampled ids included) instead of re-rendering it from text."""
        self.starts[episode] = (list(messages), list(prompt_ids))

    def fork(self, episode: str, parent: str) -> None:
        """Tree rollouts: `episode` branches from `parent`'s latest turn (called right after it): an
        engine that forks caches (HFPolicy.fork) starts the branch from the parent's cached keys and
        values of that turn, so its first prompt, the parent's, is not prefilled again."""
        if self._caches and callable(getattr(self.policy, "fork", None)):
            self.policy.fork(self._key + parent, self._key + episode)
            self.forked.add(episode)

    def _render(self, messages: list) -> str:
        return render_chat(self.tok, messages)  # bounded in time and size, one line when it fails

    def between(self, before: list, after: list, ended_with_eos: bool) -> list[int] | None:
        """The ids that follow the reply `after[len(before)]` up to the next generation prompt, or
        None (after raising, with on_mismatch="error") when `after` does not extend `before`."""
        a, b = self._render(before), self._render(after)
        reply = after[len(before)] if len(after) > len(before) else {}
        content = str(reply.get("content", ""))
        problem = None
        if not b.startswith(a):
            problem = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        elif reply.get("role") != "assistant" or not b[len(a):].startswith(content):
            problem = len(a)
        if problem is not None:
            if self.on_mismatch == "error":
                name = getattr(self.tok, "name_or_path", "") or type(self.tok).__name__
                raise TemplateMismatch(
                    f"the chat template of {name!r} does not extend the previous turn's rendering (first difference at "
                    f"character {problem}: {a[problem:problem + 24]!r} became {b[problem:problem + 24]!r}), so an "
                    "episode is not one token sequence: use a template that only appends, or set "
                    "rollout.on_template_mismatch=per-turn to train each such turn as its own sequence")
            return None
        tail = b[len(a) + len(content):]
        eos = self.tok.eos_token
        if ended_with_eos and eos and tail.startswith(eos):
            tail = tail[len(eos):]  # the sampled reply already ends with it
        return list(self.tok(tail, add_special_tokens=False)["input_ids"])

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        if contexts is None:
            raise ValueError("TokenContinuation needs the rollout's TurnContexts (which episode each prompt continues)")
        ids = []
        for messages, ctx in zip(prompts, contexts):
            start = self.starts.pop(ctx.episode, None)
            if start is not None and start[0] == messages:  # a branch's first turn: the parent's ids
                ids.append(list(start[1]))
                continue
            previous = self.contexts.get(ctx.episode)
            continued = None
            if previous is not None:
                before, prev_ids, ended = previous
                tail = self.between(before, messages, ended)
                if tail is None:
                    self.retokenized[ctx.episode] = self.retokenized.get(ctx.episode, 0) + 1
                else:
                    continued = prev_ids + tail
            ids.append(continued if continued is not None else self.policy.encode_prompt(messages))
        allowed = self.replies.options(sampling, contexts)
        if self._caches:
            completions = self.policy.generate_ids(ids, sampling, cache_keys=[self._key + c.episode for c in contexts],
                                                   **allowed)
        else:
            completions = self.policy.generate_ids(ids, sampling, **allowed)
        eos_ids = getattr(self.policy, "eos_ids", set()) or {self.tok.eos_token_id}
        for messages, ctx, p, c in zip(prompts, contexts, ids, completions):
            if c.error is None and c.response_ids is not None:
                ended = bool(c.response_ids) and c.response_ids[-1] in eos_ids
                self.contexts[ctx.episode] = (list(messages), list(p) + list(c.response_ids), ended)
        return completions

    def forget(self, episodes: list[str]) -> None:
        """These episodes ended (or start over): drop their contexts and the engine's cached prefixes."""
        for e in episodes:
            self.contexts.pop(e, None)
            self.forked.discard(e)
        if self._caches and callable(getattr(self.policy, "forget", None)):
            self.policy.forget([self._key + e for e in episodes])

    def close(self) -> None:
        if self._caches and callable(getattr(self.policy, "forget", None)):
            self.policy.forget([self._key + e for e in {*self.contexts, *self.forked}])


def caches_prefixes(policy: Any) -> bool:
    """Whether a token-level engine can keep a KV cache per episode (HFPolicy's cache_keys)."""
    return supports_tokens(policy) and "cache_keys" in inspect.signature(policy.generate_ids).parameters


class CachedPrompts:
    """A Policy for one rollout of windowed prompts over a token-level `policy`: each prompt is
    rendered as the policy would render it and, when the engine caches, sent with its episode's cache
    key, so the engine prefills only what follows the longest prefix it shares with that episode's
    previous turn.
    The sampled tokens are those of the plain policy (the cache changes no computation but its
    order). `close()` releases the cached prefixes."""

    def __init__(self, policy: Any):
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self._caches = caches_prefixes(policy)
        self.retokenized: dict[str, int] = {}  # nothing is re-rendered here (rollout reads it)
        self._key = f"prompts-{next(_instances)}:"
        self._episodes: set[str] = set()
        self.replies = AdmissibleReplies(policy)

    def fork(self, episode: str, parent: str) -> None:
        """Tree rollouts: `episode` branches from `parent`'s latest turn (TokenContinuation.fork); its
        first prompt, rendered as the parent's was, starts from the parent's cached keys and values."""
        if self._caches and callable(getattr(self.policy, "fork", None)):
            self.policy.fork(self._key + parent, self._key + episode)
            self._episodes.add(episode)

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        ids = [self.policy.encode_prompt(m) for m in prompts]
        allowed = self.replies.options(sampling, contexts)
        if contexts is None or not self._caches:
            return self.policy.generate_ids(ids, sampling, **allowed)
        self._episodes.update(c.episode for c in contexts)
        return self.policy.generate_ids(ids, sampling, cache_keys=[self._key + c.episode for c in contexts], **allowed)

    def close(self) -> None:
        if self._episodes and callable(getattr(self.policy, "forget", None)):
            self.policy.forget([self._key + e for e in self._episodes])
