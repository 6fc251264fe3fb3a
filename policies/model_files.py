"""What every engine reads the same way from a model folder: whether a local path exists, how a
chat prompt becomes token ids, which ids end a reply. HFPolicy and VLLMPolicy both use these, so a
prompt renders to the same ids on either engine (tests/vllm compares them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from agentgym.errors import ConfigError
from agentgym.policies.base import Messages


def check_model_path(model: str) -> None:
    """A model that looks like a local path must exist (a hub id is resolved by transformers)."""
    looks_local = model.startswith((".", "/", "~")) or model.count("/") > 1 or Path(model).suffix != ""
    if looks_local and not Path(model).expanduser().exists():
        raise ConfigError(f"model path {model!r} does not exist: pass a local HF folder or a hub id, "
                          "or set tiny.build=true to build a tiny model")


def encode_chat_prompt(tokenizer, messages: Messages, max_prompt_tokens: int | None) -> list[int]:
    """The chat template with the generation cue; past `max_prompt_tokens` the START is cut, so
    the current observation and the action cue stay."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    ids = list(ids)
    if max_prompt_tokens and len(ids) > max_prompt_tokens:
        ids = ids[-max_prompt_tokens:]
    return ids


def eos_ids(tokenizer, generation_eos: Any) -> set[int]:
    """The tokenizer's EOS plus the generation config's (an int or a list of them)."""
    ids: set = {tokenizer.eos_token_id}
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif isinstance(generation_eos, Iterable) and not isinstance(generation_eos, str):
        ids.update(generation_eos)
    return {int(i) for i in ids if i is not None}
