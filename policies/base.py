"""The Policy interface: a batch of chat prompts in, one Completion per prompt out.

LLM backends fill the token ids and logprobs they generated; scripted policies leave them
None. `contexts` carries what the rollout engine knows about each prompt's episode (task,
turn, env info): LLM policies ignore it, scripted ones (random, oracle) act on it. A policy that
acts on the contexts alone, and so cannot answer a prompt that comes from no episode (a reward's
judge), says so with a class attribute `acts_on_contexts = True`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentgym.tasks.spec import TaskSpec  # plain data, the layer below this contract (docs/architecture.md)

Messages = list[dict[str, str]]


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    seed: int | None = None
    # decode only replies that are one of the env's admissible actions (info["admissible_actions"],
    # in the env's action format): a token-level engine that can constrain decoding walks a trie of
    # them (HFPolicy); the rollout refuses other engines and envs with an open action space
    admissible_only: bool = False


@dataclass
class Completion:
    text: str
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    response_logprobs: list[float] | None = None
    finish_reason: str = "stop"  # "stop" | "length" | "error"
    error: str | None = None  # set when the backend failed for this prompt (infra error)
    policy_version: int | None = None  # the weights' version, when the caller tracks one (async training)
    # admissible-only decoding: per response token, the token ids decoding allowed there (None where
    # it was free); response_logprobs are then of the distribution renormalized over those ids
    response_allowed: list[list[int] | None] | None = None


@dataclass
class TurnContext:
    episode: str  # unique key of the episode within a rollout
    task: TaskSpec
    turn: int
    info: dict[str, Any] = field(default_factory=dict)
    format_action: Any = None  # callable(action) -> text in the env's action format


@runtime_checkable
class Policy(Protocol):
    def generate(
        self,
        prompts: list[Messages],
        sampling: SamplingParams | None = None,
        contexts: list[TurnContext] | None = None,
    ) -> list[Completion]: ...
