"""Policies named on a command line or in a config: `random`, `oracle`, `searching` (the env's
demonstrator that knows only what it has seen), `hf:PATH` (a local HF folder, cached hub id, GGUF
file or `agentgym models` name), `openai:URL:MODEL` (any OpenAI-compatible server). `parse_policy_spec` checks
the syntax without loading anything; `load_policy` builds the policy, importing heavy backends
(torch, the openai client) only then. Used by `agentgym eval --policy` and by a training config's
judge (`env.reward.judge.policy`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from agentgym.errors import ConfigError, MissingExtraError, install_hint
from agentgym.policies.model_catalog import check_named_model, closest_catalog_name, is_named_model
from agentgym.policies.model_files import check_device
from agentgym.policies import OraclePolicy, RandomPolicy
from agentgym.registration import get_task_space

POLICY_HELP = "random | oracle | searching | hf:PATH (HF model folder, hub id, GGUF file or `agentgym models` name) | openai:URL:MODEL"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_OPENAI = re.compile(r"^(https?://[^/:\s]+(?::\d+)?(?:/[^:\s]*)?):(.+)$")


@dataclass
class PolicySpec:
    kind: str  # random | oracle | searching | hf | openai
    target: str = ""  # model path / hub id, or base URL
    model: str = ""  # openai model name

    @property
    def label(self) -> str:
        if self.kind == "hf":
            return f"hf:{Path(self.target).name or self.target}"
        if self.kind == "openai":
            return f"openai:{self.model}"
        return self.kind

    @property
    def is_llm(self) -> bool:
        return self.kind in ("hf", "openai")


def parse_policy_spec(spec: str) -> PolicySpec:
    """Check the syntax of a --policy value (no model is loaded here)."""
    spec = spec.strip()
    if spec in ("random", "oracle", "searching"):
        return PolicySpec(spec)
    if spec.startswith("hf:"):
        path = spec[3:].strip()
        if not path:
            raise ConfigError("--policy hf:PATH needs a model folder or hub id after 'hf:'")
        if is_named_model(path):  # a catalog name or .gguf file: its file or conversion checked, nothing built
            check_named_model(path, what="--policy")
            return PolicySpec("hf", path)
        looks_local = path.startswith((".", "/", "~")) or not _HUB_ID.match(path)
        if looks_local and not Path(path).expanduser().exists():
            if (close := closest_catalog_name(path)) is not None:
                raise ConfigError(f"model {path!r} is no model agentgym knows: did you mean hf:{close}? "
                                  "(`agentgym models` lists the catalog)")
            raise ConfigError(f"model path {path!r} does not exist: pass a local HF model folder "
                              "(e.g. runs/household-tiny/final_model), a hub id in the local cache, a .gguf file "
                              "or a catalog name (`agentgym models` lists them)")
        return PolicySpec("hf", path)
    if spec.startswith("openai:"):
        match = _OPENAI.match(spec[len("openai:"):].strip())
        if not match or match.group(2).isdigit():
            raise ConfigError(f"bad policy {spec!r}: write openai:URL:MODEL, "
                              "e.g. openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct")
        return PolicySpec("openai", match.group(1), match.group(2))
    raise ConfigError(f"unknown policy {spec!r}: choose {POLICY_HELP}")


def resolve_device(device: str) -> str:
    """`auto`: cuda when there is one; any other device is checked (one line, before a model loads)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"

    check_device(device, what="--device")
    return device


def load_policy(spec: PolicySpec, env_id: str, *, seed: int = 0, device: str = "auto", task_space=None,
                hf_kwargs: dict | None = None):
    """Instantiate the policy a spec names; heavy backends are imported here, lazily.
    hf_kwargs: more HFPolicy arguments (a run's dtype and prompt budget)."""

    if spec.kind == "random":
        return RandomPolicy(seed=seed)
    if spec.kind == "oracle":
        if task_space is None:
            task_space = get_task_space(env_id)
        return OraclePolicy(task_space)
    if spec.kind == "searching":  # the demonstrator that knows only what it has seen (sft.expert=searching)
        if task_space is None:
            task_space = get_task_space(env_id)
        if not callable(getattr(task_space, "solve_searching", None)):
            raise ConfigError(f"{env_id} has no searching demonstrator (its task space has no solve_searching): "
                              "use --policy oracle")
        return OraclePolicy(task_space, search=True, seed=seed)
    if spec.kind == "hf":
        try:
            from agentgym.policies.hf import HFPolicy  # lazy: needs torch
        except ImportError as exc:
            raise MissingExtraError(f"hf: policies need torch and transformers: run "
                                    f"`{install_hint('train')}` ({exc})") from None
        return HFPolicy(spec.target, device=resolve_device(device), **(hf_kwargs or {}))
    if spec.kind == "openai":
        try:
            from agentgym.policies.openai_compat import OpenAIPolicy  # lazy: the openai extra
        except ImportError as exc:
            missing = getattr(exc, "name", "") or ""
            if missing.endswith("openai_compat"):
                raise MissingExtraError("the OpenAI-compatible policy backend (agentgym.policies.openai_compat) "
                                        "is not part of this agentgym install; upgrade agentgym") from None
            raise MissingExtraError(f"openai: policies need the openai client: run "
                                    f"`{install_hint('openai')}` ({exc})") from None
        return OpenAIPolicy(spec.target, spec.model)
    raise ConfigError(f"unknown policy kind {spec.kind!r}")
