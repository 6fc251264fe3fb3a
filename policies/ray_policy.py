"""Rollout policies as Ray actors: generation on replicas that the trainer syncs weights into.

`RayRolloutPolicy(trainer_policy, model_path, RayConfig)` is a trainer's HFPolicy whose
`generate` runs on `policy_replicas` actors, each hosting its own HFPolicy (CPU, or one GPU per
replica with `policy_num_gpus=1`). Everything the training loop touches (model, tokenizer,
trainable_parameters, save, ...) stays the local HFPolicy's, as with VLLMRolloutPolicy.

Weight sync: before generating, when the trainer's trainable parameters changed since the last
sync (torch bumps a tensor's `_version` on every in-place write), their current values are put
once in Ray's object store and every replica loads them in place (`load_state_dict`, strict on
the names sent). With LoRA only the adapter travels. `sync()` returns the seconds it took.

Batches: a generate call is split into `policy_replicas` contiguous chunks, one per replica,
and replica i samples with seed `sampling.seed + i`. One replica with the same seed gives the
completions the local HFPolicy would (tested); with several, greedy decoding is unchanged and
sampled completions follow other random streams.

On GPUs the vLLM engine is the faster replica (`agentgym.policies.vllm_engine.VLLMPolicy`, same
`sync_from` contract); this module runs the HF policy, the one the CPU test suite can exercise.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext


class PolicyWorker:
    """The actor body: one HFPolicy."""

    def __init__(self, model_path: str, policy_kwargs: dict, threads: int):
        import torch

        torch.set_num_threads(max(1, threads))
        from agentgym.policies.hf import HFPolicy

        self.policy = HFPolicy(model_path, **policy_kwargs)
        self.version = -1

    def ready(self) -> int:
        return os.getpid()

    def load_weights(self, state: dict, version: int) -> int:
        import torch

        params = dict(self.policy.model.named_parameters())
        missing = [k for k in state if k not in params]
        if missing:
            raise KeyError(f"replica has no parameters named {missing[:3]}")
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value.to(params[name].device, params[name].dtype))
        self.version = version
        return version

    def generate(self, prompts: list, sampling: SamplingParams | None) -> list[Completion]:
        return self.policy.generate(prompts, sampling, None)


class RayRolloutPolicy:
    def __init__(self, trainer_policy, model_path: str | Path, rc, **policy_kwargs: Any):
        from agentgym.executors_ray import check_resources, connect

        self.trainer = trainer_policy
        self.rc = rc
        self.ray = connect(rc)
        check_resources(dataclasses.replace(rc, num_workers=0), with_policy=True)
        gpu = rc.policy_num_gpus > 0
        kwargs = {"device": "cuda" if gpu else "cpu", "dtype": getattr(trainer_policy, "dtype", None),
                  "max_prompt_tokens": getattr(trainer_policy, "max_prompt_tokens", None),
                  "stop_strings": getattr(trainer_policy, "stop_strings", None), **policy_kwargs}
        actor = self.ray.remote(num_cpus=rc.policy_num_cpus, num_gpus=rc.policy_num_gpus)(PolicyWorker)
        threads = max(1, int(rc.policy_num_cpus))
        self.replicas = [actor.remote(str(model_path), kwargs, threads) for _ in range(rc.policy_replicas)]
        self.pids = self.ray.get([r.ready.remote() for r in self.replicas])
        self._synced_version: int | None = None
        self.num_syncs = 0
        self.last_sync_s = 0.0

    def __getattr__(self, name: str):  # only called for attributes this class does not have
        if name in ("trainer", "replicas"):
            raise AttributeError(name)
        return getattr(self.trainer, name)

    def _weights_version(self) -> int:
        return sum(int(p._version) for p in self.trainer.trainable_parameters())

    def sync(self, force: bool = False) -> float:
        """Push the trainer's trainable parameters to every replica if they changed; seconds."""
        version = self._weights_version()
        if not force and version == self._synced_version:
            return 0.0
        t0 = time.perf_counter()
        state = {n: p.detach().to("cpu", copy=True) for n, p in self.trainer.model.named_parameters() if p.requires_grad}
        ref = self.ray.put(state)  # one copy in the object store, shared by the replicas of a node
        self.ray.get([r.load_weights.remote(ref, version) for r in self.replicas])
        self._synced_version = version
        self.num_syncs += 1
        self.last_sync_s = time.perf_counter() - t0
        return self.last_sync_s

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        if not prompts:
            return []
        self.sync()
        n = len(self.replicas)
        bounds = [len(prompts) * i // n for i in range(n + 1)]
        refs = []
        for i in range(n):
            chunk = prompts[bounds[i]:bounds[i + 1]]
            if not chunk:
                continue
            s = sampling
            if sampling is not None and sampling.seed is not None and i:
                s = dataclasses.replace(sampling, seed=sampling.seed + i)
            refs.append(self.replicas[i].generate.remote(chunk, s))
        return [c for part in self.ray.get(refs) for c in part]

    def close(self) -> None:
        for r in getattr(self, "replicas", []):
            try:
                self.ray.kill(r)
            except Exception:
                pass
        self.replicas = []
        if hasattr(self.trainer, "close"):
            self.trainer.close()
