"""Rollout policies as Ray actors: generation on replicas that the trainer syncs weights into.

`RayRolloutPolicy(trainer_policy, model_path, RayConfig)` is a trainer's HFPolicy whose
`generate` runs on `policy_replicas` actors (CPU, or one GPU per replica with
`policy_num_gpus=1`). Each replica hosts, as `RayConfig.policy_engine` says, an HFPolicy ("hf")
or a vLLM engine ("vllm", `VLLMPolicy` with its engine core inside the actor). Everything the
training loop touches (model, tokenizer, trainable_parameters, save, ...) stays the local
HFPolicy's, as with VLLMRolloutPolicy.

Weight sync: before generating, when the trainer's trainable parameters changed since the last
sync (torch bumps a tensor's `_version` on every in-place write), the new weights are put once
in Ray's object store and every replica loads them. `sync()` returns the seconds it took.
- HF replicas load the trainable tensors in place (strict on the names sent; with LoRA only the
  adapter travels).
- vLLM replicas take the full checkpoint through `VLLMPolicy.sync_weights`, or with LoRA the
  saved adapter's files (bytes, so no shared file system is needed) through `sync_lora`.

Faults: replicas are created with `max_restarts=-1`, so Ray starts a new process for one that
dies. A restarted process holds the start model, not the trained weights: every generate call
names the weights version it expects and a replica holding another one answers None. Either
way (died, or found restarted) the trainer waits for the new process (up to `step_timeout_s`),
loads the last weights into it and asks once more, so a replica never serves stale weights.
Only a replica that fails twice in one call, or does not answer within `step_timeout_s`
(killed, then restarted), returns error completions: those episodes end `infra_error` and the
rollout goes on. An exception raised inside a replica's policy fails that call's prompts the
same way, naming its cause; the replica is not restarted.

Batches: a generate call is split into `policy_replicas` contiguous chunks, one per replica,
and replica i samples with seed `sampling.seed + i`. One replica with the same seed gives the
completions the local HFPolicy would (tested); with several, greedy decoding is unchanged and
sampled completions follow other random streams.

On GPUs the vLLM replica is the one to use; on CPU both run (the tests exercise both).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext
from agentgym.policies.engines import EngineSettings, FollowsTrainer
from agentgym.executors_ray import check_resources, connect
from agentgym.policies.vllm_engine import VLLMPolicy, adapter_files, engine_kwargs_for


class PolicyWorker:
    """The actor body: one HFPolicy or one VLLMPolicy."""

    def __init__(self, engine: str, model_path: str, policy_kwargs: dict, threads: int):
        import torch

        torch.set_num_threads(max(1, threads))
        self.engine = engine
        if engine == "vllm":
            self.policy = VLLMPolicy(model_path, **policy_kwargs)
        else:
            from agentgym.policies.hf import HFPolicy  # lazy: needs torch

            self.policy = HFPolicy(model_path, **policy_kwargs)
        self.version = -1

    def ready(self) -> int:
        return os.getpid()

    def load_weights(self, update: dict, version: int) -> int:
        """`update` is {"tensors": {name: tensor}} or, for a vLLM replica serving LoRA,
        {"adapter_files": {file name: bytes}}."""
        if "adapter_files" in update:
            import tempfile

            with tempfile.TemporaryDirectory(prefix="agentgym_replica_lora_") as tmp:
                for name, data in update["adapter_files"].items():
                    Path(tmp, name).write_bytes(data)
                self.policy.sync_lora(tmp, copy=True)
        elif self.engine == "vllm":
            self.policy.sync_weights(update["tensors"])
        else:
            self._copy_in_place(update["tensors"])
        self.version = version
        return version

    def _copy_in_place(self, state: dict) -> None:
        import torch

        params = dict(self.policy.model.named_parameters())
        missing = [k for k in state if k not in params]
        if missing:
            raise KeyError(f"replica has no parameters named {missing[:3]}")
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value.to(params[name].device, params[name].dtype))

    def generate(self, prompts: list, sampling: SamplingParams | None, version: int,
                 as_ids: bool = False) -> list[Completion] | None:
        """None when this process does not hold weights `version` (Ray restarted it). as_ids:
        the prompts are token ids (a conversation continued token in / token out)."""
        if version != self.version:
            return None
        if as_ids:
            return self.policy.generate_ids(prompts, sampling or SamplingParams())
        return self.policy.generate(prompts, sampling, None)


class RayRolloutPolicy(FollowsTrainer):
    def __init__(self, trainer_policy, model_path: str | Path, rc, seed: int = 0, vllm_kwargs: dict | None = None,
                 **policy_kwargs: Any):
        """policy_kwargs go to each HF replica (e.g. lora=, to match the trainer's parameter
        names); vllm_kwargs to each vLLM replica (VLLMPolicy's arguments, e.g. kv_cache_gib)."""

        self.trainer = trainer_policy
        self.rc = rc
        self.engine = rc.policy_engine
        self.ray = connect(rc)
        check_resources(dataclasses.replace(rc, num_workers=0), with_policy=True)
        gpu = rc.policy_num_gpus > 0
        if self.engine == "vllm":
            kwargs = engine_kwargs_for(trainer_policy, vllm_kwargs or {})
        else:
            kwargs = {"device": "cuda" if gpu else "cpu", "dtype": getattr(trainer_policy, "dtype", None),
                      "max_prompt_tokens": getattr(trainer_policy, "max_prompt_tokens", None),
                      "stop_strings": getattr(trainer_policy, "stop_strings", None), **policy_kwargs}
        actor = self.ray.remote(num_cpus=rc.policy_num_cpus, num_gpus=rc.policy_num_gpus, max_restarts=-1,
                                max_task_retries=0)(PolicyWorker)
        threads = max(1, int(rc.policy_num_cpus))
        # replica i's own sampling stream (vLLM draws a seed per request from it)
        per_replica = [{**kwargs, "seed": seed + i} if self.engine == "vllm" else kwargs
                       for i in range(rc.policy_replicas)]
        self.replicas = [actor.remote(self.engine, str(model_path), k, threads) for k in per_replica]
        self.pids = self.ray.get([r.ready.remote() for r in self.replicas])
        self._synced_version: int | None = None
        self._weights_ref = None  # the last weights sent, for a replica Ray restarted since
        self.num_syncs = 0
        self.last_sync_s = 0.0
        self.restarts = 0

    def sync(self, force: bool = False) -> float:
        """Push the trainer's trainable parameters to every replica if they changed; seconds."""
        version = self.weights_version()
        if not force and version == self._synced_version:
            return 0.0
        t0 = time.perf_counter()
        self._weights_ref = self.ray.put(self._weights_update())  # one copy, shared by the replicas of a node
        refs = [r.load_weights.remote(self._weights_ref, version) for r in self.replicas]
        for i, ref in enumerate(refs):
            try:
                self.ray.get(ref, timeout=self.rc.step_timeout_s)
            except self.ray.exceptions.RayActorError:  # died (or restarting): wait for its new process, load again
                self._reload(i, version)
        self._synced_version = version
        self.num_syncs += 1
        self.last_sync_s = time.perf_counter() - t0
        return self.last_sync_s

    def _weights_update(self) -> dict:
        model = self.trainer.model
        lora = getattr(self.trainer, "is_lora", False)
        if self.engine == "vllm" and lora:
            return {"adapter_files": adapter_files(model)}
        # vLLM reloads whole checkpoints (HF names), HF replicas take just what trains
        everything = self.engine == "vllm"
        return {"tensors": {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters()
                            if everything or p.requires_grad}}

    # --- what the rollout engine asks of a token-level policy (agentgym.continuation) ---------
    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams | None = None) -> list[Completion]:
        return self._fan_out(prompt_ids, sampling, as_ids=True)

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        return self._fan_out(prompts, sampling, as_ids=False)

    def _fan_out(self, prompts: list, sampling: SamplingParams | None, as_ids: bool) -> list[Completion]:
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
            refs.append((i, chunk, s, self.replicas[i].generate.remote(chunk, s, self._synced_version, as_ids)))
        return [c for i, chunk, s, ref in refs for c in self._answer(i, chunk, s, ref, as_ids)]

    def _answer(self, i: int, chunk: list, sampling: SamplingParams | None, ref, as_ids: bool = False) -> list[Completion]:
        """Replica i's completions for `chunk`. A replica that died or restarted is waited for,
        given the weights again and asked once more; only if that fails too are its prompts
        error completions. One that does not answer in time is killed (Ray restarts it)."""
        ray, timeout, version = self.ray, self.rc.step_timeout_s, self._synced_version
        for attempt in range(2):
            try:
                out = ray.get(ref, timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                self.restarts += 1
                ray.kill(self.replicas[i], no_restart=False)
                return self._failed(chunk, f"policy replica {i} did not answer within {timeout:g}s (restarted)")
            except ray.exceptions.RayActorError as exc:  # ActorDiedError, ActorUnavailableError
                out, what = None, f"died ({type(exc).__name__})"
            except ray.exceptions.RayTaskError as exc:  # the replica's own policy raised: an infra error, not a death
                cause = str(exc.cause if getattr(exc, "cause", None) is not None else exc).splitlines()
                return self._failed(chunk, f"policy replica {i} failed: {cause[0] if cause else type(exc).__name__}")
            else:
                if out is not None:
                    return out
                what = "was restarted"  # a new process with the start model's weights
            self.restarts += 1
            if attempt == 1:
                break
            try:
                self._reload(i, version)
            except (AgentGymError, ray.exceptions.RayError) as exc:
                return self._failed(chunk, f"policy replica {i} {what} and did not take the weights back: "
                                           f"{type(exc).__name__}")
            ref = self.replicas[i].generate.remote(chunk, sampling, version, as_ids)
        return self._failed(chunk, f"policy replica {i} {what} twice in one call")

    @staticmethod
    def _failed(chunk: list, message: str) -> list[Completion]:
        return [Completion("", finish_reason="error", error=message) for _ in chunk]

    def _reload(self, i: int, version: int) -> None:
        """Wait (up to step_timeout_s) until replica i answers from its new process, then load the
        last weights into it."""
        ray, deadline = self.ray, time.monotonic() + self.rc.step_timeout_s
        while True:
            try:
                self.pids[i] = ray.get(self.replicas[i].ready.remote(), timeout=max(deadline - time.monotonic(), 0.001))
                break
            except ray.exceptions.GetTimeoutError:
                raise AgentGymError(f"policy replica {i} did not come back within {self.rc.step_timeout_s:g}s "
                                    "after it died") from None
            except ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    raise AgentGymError(f"policy replica {i} did not come back within {self.rc.step_timeout_s:g}s "
                                        "after it died") from None
                time.sleep(0.1)
        ray.get(self.replicas[i].load_weights.remote(self._weights_ref, version),
                timeout=max(deadline - time.monotonic(), 1.0))

    def sleep(self, level: int = 1) -> None:
        pass  # the replicas hold their own memory, apart from the trainer's

    def close(self) -> None:
        for r in getattr(self, "replicas", []):
            try:
                self.ray.kill(r)
            except Exception:
                pass
        self.replicas = []
        if hasattr(self.trainer, "close"):
            self.trainer.close()


def ray_rollout_engine(trainer_policy, model_path: str, settings: EngineSettings) -> RayRolloutPolicy:
    """The registered builder of `policy.engine=ray` (ray.policy_engine: what each replica runs)."""
    return RayRolloutPolicy(trainer_policy, model_path, settings.ray, seed=settings.seed, lora=settings.policy.lora,
                            vllm_kwargs=settings.policy.vllm.policy_kwargs())
