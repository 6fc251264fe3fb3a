"""What a trainer needs from a policy, and the rollout engines that generate for it.

A trainer holds two objects:

* a `TrainablePolicy` (HFPolicy): the model it updates, its tokenizer, its reference for KL;
* a `RolloutEngine` built from it by name (`policy.engine` in the config): what plays the
  rollouts and evaluations. "hf" is the trainer's HFPolicy itself; "pool" the same policy decoding on
  a preallocated KV pool with one step function (agentgym.policies.pool_engine); "vllm" a vLLM engine in this
  process; "ray" replicas in Ray actors. An engine follows the trainer's weights through one
  path, `sync()`: it reads the trainer policy's trainable parameters when they changed since its
  last sync (torch bumps a tensor's `_version` on every in-place write, so one sum tells).

Engines are found in a registry, as executors and envs are: `register_engine(name, builder)`,
the builder a callable or an import string "module:function" loaded on first use, called as
`builder(trainer_policy, model_path, settings)` (settings: `EngineSettings`, the config sections an
engine reads and the run's seed; never the trainer's whole config). docs/architecture.md shows a
complete engine registered from outside.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from agentgym.errors import ConfigError
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext


@runtime_checkable
class TrainablePolicy(Protocol):
    """The policy a trainer updates (HFPolicy is one): a torch model, its tokenizer, token-level
    generation and persistence. Everything the learner, SFT and checkpoints touch is here."""

    model: Any  # a torch.nn.Module whose forward takes input_ids / attention_mask and returns .logits
    tokenizer: Any
    device: Any
    eos_ids: set[int]  # the ids that end a reply (continued conversations, admissible-only decoding)

    def trainable_parameters(self) -> list: ...

    def reference_forward(self, **kwargs: Any) -> Any: ...  # the frozen reference, for the KL term

    def hidden_size(self) -> int: ...

    def encode_prompt(self, messages: Messages) -> list[int]: ...

    def encode_response(self, text: str, add_eos: bool = True) -> list[int]: ...

    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> list[Completion]: ...

    def save(self, out_dir: str | Path, state_dict: dict | None = None) -> None: ...

    def load_weights(self, model_dir: str | Path) -> None: ...

    # the sampler's generator and last seed, saved in every checkpoint so a resumed run samples on
    # as the saved one would have; the state is the policy's own (HFPolicy: {"rng", "last_seed"})
    def sampling_state(self) -> dict: ...

    def load_sampling_state(self, state: dict) -> None: ...

    # --- optional: the trainer asks for these only where noted ---------------------------------
    # growing conversations kept as KV caches (HFPolicy): drop the given episodes' caches, or all
    # (None); looked up with getattr, a policy without caches leaves it out. A tree rollout's branch
    # starts from its parent's cache through `fork(parent_key, child_key)` (HFPolicy.fork), looked up
    # the same way
    def forget(self, cache_keys: list[str] | None = None) -> None: ...

    # rollout.max_staleness > 0: a copy that samples in the batch producer's thread and follows the
    # trainer through its `sync()` (RolloutEngine), loading the weights the trainer hands it with
    # `copy.publish(version)` after each update; `copy.synced_version` is the version it samples
    # with (None on a trainer's own policy). HFPolicy.rollout_copy is the reference.
    def rollout_copy(self, version: int = 0) -> TrainablePolicy: ...

    def publish(self, version: int) -> None: ...

    @property
    def synced_version(self) -> int | None: ...


@runtime_checkable
class RolloutEngine(Protocol):
    """Generates the trainer's rollouts and evaluations with the trainer's current weights."""

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]: ...

    def sync(self, force: bool = False) -> float: ...  # take the trainer's weights if they changed; seconds

    def sleep(self, level: int = 1) -> None: ...  # free accelerator memory for the update (no-op on CPU)

    def close(self) -> None: ...


class FollowsTrainer:
    """Base of engines that generate for a trainer's policy held in `self.trainer`: prompts are
    encoded, and replies end, exactly as the trainer's own tokenizer says (the engine loads the same
    model folder), so a conversation continued token in / token out (agentgym.continuation) has the
    same ids on both sides; `weights_version` tells when the trainer's weights changed since a sync."""

    trainer: Any

    @property
    def tokenizer(self) -> Any:
        return self.trainer.tokenizer

    @property
    def eos_ids(self) -> set[int]:
        return self.trainer.eos_ids

    def encode_prompt(self, messages: Messages) -> list[int]:
        return self.trainer.encode_prompt(messages)

    def weights_version(self) -> int:
        """torch bumps a tensor's `_version` on every in-place write (optimizer steps, loading)."""
        return sum(int(p._version) for p in self.trainer.trainable_parameters())


@dataclass(frozen=True)
class EngineSettings:
    """What an engine builder reads: the config's `policy:` section (engine, vllm, lora, ...), its
    `ray:` section (replicas) and the run's seed. Sections are passed as they are (the trainer
    layer owns their dataclasses), so a new field reaches every engine without a change here."""

    policy: Any
    seed: int = 0
    ray: Any = None


EngineBuilder = Callable[[TrainablePolicy, str, EngineSettings], RolloutEngine]
_ENGINES: dict[str, EngineBuilder | str] = {}
_TRAINER_MODEL: set[str] = set()  # engines that are the trainer's policy object itself
_RAY_CLUSTER: set[str] = set()  # engines whose replicas are placed on the run's Ray cluster


def register_engine(name: str, builder: EngineBuilder | str, *, trainer_model: bool = False,
                    needs_ray_cluster: bool = False) -> None:
    """Make `policy.engine=name` build rollout engines with `builder(trainer_policy, model_path, settings)`.

    trainer_model=True declares that the builder returns the trainer's policy itself (it generates
    with the very model it trains, as "hf" does): the config checks allow such an engine with
    data_parallel=fsdp (which shards that model) and with rollout.max_staleness > 0 (whose producer
    samples from a copy of it); any other engine has weights of its own, synced by `sync()`.
    needs_ray_cluster=True: it runs policy replicas on the Ray cluster of the config's `ray:`
    section (ray.policy_replicas, ray.policy_engine): the trainer checks the cluster can place them."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"an engine name is a non-empty string, got {name!r}")
    _ENGINES[name] = builder
    for declared, members in ((trainer_model, _TRAINER_MODEL), (needs_ray_cluster, _RAY_CLUSTER)):
        if declared:
            members.add(name)
        else:
            members.discard(name)


def generates_with_trainer_model(name: str) -> bool:
    """Whether `policy.engine=name` generates with the trainer's own model (declared at registration)."""
    return name in _TRAINER_MODEL


def needs_ray_cluster(name: str) -> bool:
    """Whether `policy.engine=name` runs replicas on the Ray cluster (declared at registration)."""
    return name in _RAY_CLUSTER


def engine_names() -> list[str]:
    return sorted(_ENGINES)


def check_engine(name: Any) -> None:
    if name not in _ENGINES:
        raise ConfigError(f"policy.engine={name!r} is unknown; choose one of {', '.join(engine_names())} "
                          "(or register your own with agentgym.policies.engines.register_engine)")


def make_engine(name: str, trainer_policy: TrainablePolicy, model_path: str | Path,
                settings: EngineSettings) -> RolloutEngine:
    check_engine(name)
    builder = _ENGINES[name]
    if isinstance(builder, str):
        module, _, attr = builder.partition(":")
        builder = getattr(importlib.import_module(module), attr)
        _ENGINES[name] = builder
    return builder(trainer_policy, str(model_path), settings)


register_engine("hf", lambda trainer_policy, _path, _settings: trainer_policy, trainer_model=True)  # what it trains
register_engine("pool", "agentgym.policies.pool_engine:pool_rollout_engine", trainer_model=True)  # hf, pooled
register_engine("vllm", "agentgym.policies.vllm_engine:vllm_rollout_engine")
register_engine("ray", "agentgym.policies.ray_policy:ray_rollout_engine", needs_ray_cluster=True)
