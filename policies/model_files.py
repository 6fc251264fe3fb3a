"""What every engine reads the same way from a model folder: whether it can load (a local path
exists, a hub id is cached or reachable; checked in one line before anything is built), how a
chat prompt becomes token ids, which ids end a reply. HFPolicy and VLLMPolicy both use these, so a
prompt renders to the same ids on either engine (tests/vllm compares them)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

from agentgym.errors import ConfigError
from agentgym.policies.base import Messages
from agentgym.chat_template import render_chat
from agentgym.policies.model_catalog import check_named_model, closest_catalog_name, is_named_model, \
    resolve_named_model

# every dtype a config may name, and the torch dtype (by name) it means; "auto" (None): bf16 on CUDA, fp32 elsewhere
DTYPES = {"auto": None, "fp32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
          "fp16": "float16", "float16": "float16"}


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # "gpt2", "Qwen/Qwen2.5-0.5B-Instruct"


def looks_local(model: str) -> bool:
    """A path, not a hub id: it exists on disk, starts with . / ~, has more than one / or a
    character no hub id has. (A hub id may contain dots: Qwen/Qwen2.5-0.5B-Instruct.)"""
    return (Path(model).expanduser().exists() or model.startswith((".", "/", "~")) or "\\" in model
            or not _HUB_ID.match(model))


def hub_offline() -> bool:
    """Offline mode as huggingface_hub and transformers read it (their constants are read at import)."""
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return any(f.strip().lower() in ("1", "true", "yes", "on") for f in flags)


def check_model_path(model: str, what: str = "model") -> None:
    """One line, at once, for a model that cannot load: a local-looking path is checked on disk
    only (never sent to the hub, whose retries take a minute without network); a hub id must be
    in the local cache, or the hub must answer for it (one request, no retries; in offline mode
    HF_HUB_OFFLINE=1 only the cache counts)."""
    model = str(model)
    if is_named_model(model):
        check_named_model(model, what)
        return
    if _HUB_ID.match(model) and (Path(model) / "agentgym_tiny.json").is_file():
        # an earlier agentgym built a random tiny model at the path a hub id names; transformers loads a
        # folder of that name before the hub's model, so the id would silently mean the random model
        raise ConfigError(f"{what} {model!r} reads as a hub id, but the folder ./{model} here holds an untrained "
                          f"tiny model built in its place, which would be loaded instead: delete or rename ./{model} "
                          f"to use the hub's model, or write ./{model} to train that tiny model")
    if looks_local(model):
        path = Path(model).expanduser()
        if not path.exists():
            tiny = ", or leave policy.model empty with tiny.build=true to build a tiny model" \
                if what in ("model", "policy.model") else ""
            raise ConfigError(f"{what} path {model!r} does not exist: pass a local HF folder or a hub id{tiny}")
        if path.is_dir() and not any((path / f).is_file() for f in ("config.json", "adapter_config.json")):
            raise ConfigError(f"{what} folder {model!r} holds no config.json: pass the folder a model was saved "
                              "into (e.g. runs/household-tiny/final_model)")
        return
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.utils import validate_repo_id
    except ImportError:  # transformers will say what is missing
        return
    try:
        validate_repo_id(model)
    except Exception:  # noqa: BLE001 - HFValidationError: a name no hub repo can have
        raise ConfigError(f"{what}={model[:80]!r} is neither a local folder nor a hub id (org/name of letters, digits, "
                          "'-', '_', '.')") from None
    if isinstance(try_to_load_from_cache(model, "config.json"), str) or \
            isinstance(try_to_load_from_cache(model, "adapter_config.json"), str):
        return
    close = closest_catalog_name(model)
    if close and "/" not in model:  # a hub id without an org, near a catalog name: a misspelled catalog name
        raise ConfigError(f"{what} {model!r} is no model agentgym knows: did you mean {close}? "
                          "(`agentgym models` lists the catalog)")
    if hub_offline():
        raise ConfigError(f"{what} {model!r} is no local folder and not in the local Hugging Face cache, and "
                          "offline mode is on (HF_HUB_OFFLINE=1): check the spelling, or download it where there is "
                          f"network (`hf download {model}`)")
    _check_on_hub(model, what)


def resolve_model(model: str, what: str = "model") -> str:
    """What a loader passes to from_pretrained: the model string checked (`check_model_path`), a catalog
    name or GGUF file replaced by its converted folder (converted on first use)."""
    model = str(model)
    if is_named_model(model):
        return resolve_named_model(model, what)
    check_model_path(model, what)
    return model


# no network, DNS, proxy, timeout (httpx's and requests' names): the hub cannot be reached
_UNREACHABLE = {"ConnectError", "ConnectionError", "NetworkError", "TimeoutException", "Timeout", "ConnectTimeout",
                "ProxyError", "OfflineModeIsEnabled"}


def _check_on_hub(model: str, what: str) -> None:
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        model_info(model, timeout=10)
    except GatedRepoError:
        return  # it exists; transformers names the access it needs
    except RepositoryNotFoundError:
        raise ConfigError(f"{what} {model!r} is neither a local folder nor a model on the Hugging Face hub "
                          "(a private one needs HF_TOKEN): check the spelling") from None
    except Exception as exc:
        if not {c.__name__ for c in type(exc).__mro__} & _UNREACHABLE:
            return  # the hub answered with something else (rate limit, 5xx): let transformers try
        raise ConfigError(f"{what} {model!r} is no local folder, not in the local Hugging Face cache, and the hub "
                          f"cannot be reached ({type(exc).__name__}): check the spelling, download it where there is "
                          f"network (`hf download {model}`), or set HF_HUB_OFFLINE=1 to use only the cache") from None


def check_device(device: str, what: str = "policy.device") -> None:
    """One line before any model is built when the device cannot be used on this machine."""
    if device == "cpu":
        return  # always usable, and saying so needs no torch (`agentgym train --print-config` runs without it)
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"{what}={device!r} is not a device: use cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build of torch" if torch.version.cuda is None else "no CUDA GPU visible"
            raise ConfigError(f"{what}={device} but this machine has {build} (torch {torch.__version__}): "
                              f"set {what}=cpu, or install a CUDA torch on a GPU machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"{what}={device} but only {torch.cuda.device_count()} CUDA device(s) are visible: "
                              f"use cuda:0..cuda:{torch.cuda.device_count() - 1}")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{what}=mps but MPS is not available here: set {what}=cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{what}={device!r}: agentgym trains on cpu, cuda or mps")


def encode_chat_prompt(tokenizer, messages: Messages, max_prompt_tokens: int | None) -> list[int]:
    """The chat template with the generation cue, rendered within bounds of time and size (one line when
    the template cannot render it: policies/chat_template.py) and tokenized as apply_chat_template does;
    past `max_prompt_tokens` the START is cut, so the current observation and the action cue stay."""
    ids = list(tokenizer(render_chat(tokenizer, messages), add_special_tokens=False)["input_ids"])
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
