"""VLLMPolicy: an in-process vLLM engine (`vllm.LLM`) as an agentgym Policy, with weight sync.

Same contract as HFPolicy: prompts are rendered with the model's own chat template (the
transformers tokenizer, exactly as HFPolicy does), generated from token-id prompts, and each
Completion records the exact `prompt_ids`, the sampled `response_ids` and the logprob of every
sampled token.

Recorded logprobs use vLLM's `logprobs_mode="raw_logprobs"`: log_softmax of the model's logits
before temperature, top-k/top-p or any other processor, i.e. the policy at temperature 1 --
the same quantity HFPolicy records and trainers.ppo recomputes for the PPO ratio. (The
"processed_*" modes would give the tempered/truncated sampling distribution instead.)
Agreement with a transformers forward pass is tested (tests/vllm) and benchmarked
(benchmarks/speed/vllm_rollout.py): ~1e-6 in fp32 on CPU.

Weight sync from a trainer (vLLM 0.32, V1 engine):
- full weights: `sync_weights(named tensors)` -> `collective_rpc("reload_weights",
  weights_iterator=...)` (the worker's in-place reload, which runs the model's own
  `load_weights` name mapping, e.g. q/k/v -> qkv_proj), then the prefix cache is reset so no
  KV block computed with the old weights is reused. The iterator is passed by reference, which
  needs the engine core in this process: we set VLLM_ENABLE_V1_MULTIPROCESSING=0 (also what
  lets the trainer and the engine share one process / one GPU).
- LoRA: `sync_lora(adapter_dir)` registers the saved PEFT adapter as a new LoRARequest with a
  fresh int id (vLLM caches adapters by id) and drops the previous one.
`sync_from(hf_policy)` picks the right one for an HFPolicy.

Sleep/wake: `sleep()` / `wake_up()` call vLLM's sleep mode on CUDA (enable_sleep_mode=True) so
the trainer can use the GPU memory between rollouts; vLLM's CPU worker has no sleep mode, so on
CPU both are no-ops.

Side effects of in-process vLLM that we undo: its CPU worker replaces `torch.set_num_threads`
with a no-op and drops torch to 1 thread; the trainer in the same process relies on both, so
they are restored after the engine is built.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import sys
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from agentgym.errors import ConfigError, require
from agentgym.policies.model_files import DTYPES, encode_chat_prompt, eos_ids, resolve_model
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext
from agentgym.policies.engines import EngineSettings, FollowsTrainer



def _is_cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch comes with vllm
        return False


_PARKED_ENGINES: list = []  # closed while another engine was alive (see VLLMPolicy.close)


def _shield_llvmlite_from_vllm_scan() -> None:
    """Work around a vLLM 0.32 start-up crash when llvmlite is loaded (numba, pulled in by bm25s
    for the search and web envs): vLLM's kernel-override scan reads `vars(obj)` of every module
    attribute, and llvmlite's library wrapper answers `__dict__` with a wrapped C symbol instead of
    a dict. Giving the wrapper a real (empty) `__dict__` entry makes the scan skip it."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    lib = getattr(ffi, "lib", None) if ffi is not None else None
    table = getattr(lib, "_fntab", None)
    if isinstance(table, dict):
        table.setdefault("__dict__", {})


class VLLMPolicy:
    _live_engines = 0  # engines alive in this process (see close)

    def __init__(
        self,
        model_path: str | Path,
        dtype: str | None = None,
        gpu_memory_utilization: float | None = None,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        max_model_len: int | None = 2048,
        seed: int = 0,
        max_prompt_tokens: int | None = None,
        stop_strings: list[str] | None = None,
        enable_sleep_mode: bool | None = None,
        kv_cache_gib: float | None = None,
        enforce_eager: bool | None = None,
        trust_remote_code: bool = False,
        **engine_kwargs: Any,
    ):
        """model_path: a local HF folder (or a PEFT adapter folder whose config names its base:
        the base is served and the adapter applied as the first LoRA). dtype: fp32 / bf16 / fp16
        (default fp32 on CPU, bf16 on CUDA). gpu_memory_utilization: share of GPU memory vLLM
        may take (CUDA; default 0.3 so a trainer fits beside it; on CPU, given without
        kv_cache_gib, the share of RAM vLLM's CPU worker sizes its KV cache from). kv_cache_gib:
        explicit KV-cache size (default 1 GiB on CPU). enable_lora: serve LoRA adapters (needed for `sync_lora`).
        max_model_len: context limit of the engine (prompt + response). engine_kwargs go to
        vllm.LLM unchanged."""
        from transformers import AutoTokenizer

        model_path = resolve_model(str(model_path))  # a catalog name or GGUF file: its converted folder
        self.on_cuda = _is_cuda_available()
        if dtype is not None and dtype not in DTYPES:
            raise ConfigError(f"unknown dtype {dtype!r}; choose fp32, bf16 or fp16")
        self.dtype = DTYPES.get(dtype) or ("bfloat16" if self.on_cuda else "float32")
        adapter_dir = Path(model_path).expanduser()
        initial_adapter = None
        base_path = model_path
        if (adapter_dir / "adapter_config.json").is_file():
            import json

            adapter_cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
            base_path = adapter_cfg["base_model_name_or_path"]
            initial_adapter = str(adapter_dir)
            enable_lora = True
            max_lora_rank = max(max_lora_rank, int(adapter_cfg.get("r", 8)))
        self.base_path = base_path
        self.enable_lora = enable_lora
        self.max_lora_rank = max_lora_rank
        self.max_prompt_tokens = max_prompt_tokens
        self.stop_strings = list(stop_strings or [])
        self.max_model_len = max_model_len
        tok_src = model_path if (adapter_dir / "tokenizer_config.json").is_file() or not initial_adapter else base_path
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(tok_src, trust_remote_code=trust_remote_code)
        except OSError as exc:
            raise ConfigError(f"cannot load tokenizer of {tok_src!r}: {exc}".splitlines()[0]) from None
        self.eos_ids = self._eos_ids(base_path)
        try:
            from transformers import AutoConfig

            text_config = AutoConfig.from_pretrained(base_path, trust_remote_code=trust_remote_code).get_text_config()
            self.tied_embeddings = bool(getattr(text_config, "tie_word_embeddings", False))
            context_len = getattr(text_config, "max_position_embeddings", None)
        except (OSError, ValueError):
            self.tied_embeddings, context_len = False, None

        # The engine core must live in this process: weight sync hands it tensors by reference.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        if enable_sleep_mode is None:
            enable_sleep_mode = self.on_cuda
        self.sleep_supported = bool(enable_sleep_mode and self.on_cuda)
        kwargs: dict[str, Any] = dict(model=base_path, tokenizer=tok_src, dtype=self.dtype, seed=seed,
                                      max_model_len=max_model_len, trust_remote_code=trust_remote_code,
                                      logprobs_mode="raw_logprobs")
        if self.on_cuda:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization if gpu_memory_utilization is not None else 0.3
            kwargs["enable_sleep_mode"] = self.sleep_supported
            if enforce_eager is not None:
                kwargs["enforce_eager"] = enforce_eager
        else:
            # CPU: no CUDA graphs; torch.compile of the model costs minutes on a small machine
            # for little gain on tiny models, so eager by default (enforce_eager=False compiles).
            if gpu_memory_utilization is not None and kv_cache_gib is None:
                kwargs["gpu_memory_utilization"] = gpu_memory_utilization  # vLLM: share of RAM for the worker
            else:  # an explicit KV-cache size is predictable on a shared machine
                kwargs["kv_cache_memory_bytes"] = int((kv_cache_gib or 1.0) * (1 << 30))
            if enforce_eager is None or enforce_eager:
                kwargs["enforce_eager"] = True
                kwargs["compilation_config"] = {"mode": 0}
            # A prompt split over two scheduler steps (chunked prefill) has its first sampled token
            # thrown away, and vLLM 0.32 rewinds that request's seeded generator with a CUDA-only
            # call: on CPU every request of the batch then fails ("CPU Generator does not use
            # offset") once a turn's prompts exceed the step's token budget. Whole prompts only.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(4096, max_model_len or context_len or 0)  # >= the longest prompt
        if enable_lora:
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
        # Prompts that share a prefix (a group's system prompt and task; a growing conversation's
        # earlier turns) are prefilled once; the counters behind prefix_cache_hit_rate() need stats.
        kwargs.update(enable_prefix_caching=True, disable_log_stats=False)
        kwargs.update(engine_kwargs)

        vllm = require("vllm", "vllm")
        import torch

        import random

        # vLLM reseeds the global RNGs and retunes torch threads while it starts; a trainer in
        # the same process depends on both (exact resume, torch_threads), so they are put back.
        set_threads, threads = torch.set_num_threads, torch.get_num_threads()
        rng_states = (torch.get_rng_state(), np.random.get_state(), random.getstate())
        _shield_llvmlite_from_vllm_scan()
        try:
            self.llm = vllm.LLM(**kwargs)
        finally:
            torch.set_num_threads = set_threads
            torch.set_num_threads(threads)
            torch.set_rng_state(rng_states[0])
            np.random.set_state(rng_states[1])
            random.setstate(rng_states[2])
        VLLMPolicy._live_engines += 1
        self._vllm = vllm
        self._lora_request = None
        self._lora_id = 0
        self._lora_dirs: list[Path] = []
        self._owned_lora_root: Path | None = None
        self._rng = np.random.default_rng(seed)
        self._last_seed: int | None = None
        self.sync_seconds: list[float] = []
        if initial_adapter:
            self.sync_lora(initial_adapter, copy=False)

    def prefix_cache_hit_rate(self) -> float | None:
        """Share of prompt tokens served from vLLM's prefix cache since the engine started (None
        when vLLM keeps no stats)."""
        try:
            metrics = {m.name: m for m in self.llm.get_metrics()}
        except Exception:  # stats off (engine_args disable_log_stats=True) or another vLLM
            return None
        queries, hits = metrics.get("vllm:prefix_cache_queries"), metrics.get("vllm:prefix_cache_hits")
        if queries is None or hits is None or not getattr(queries, "value", 0):
            return None
        return float(hits.value) / float(queries.value)

    # --- tokens ---------------------------------------------------------------------------
    def _eos_ids(self, base_path: str) -> set[int]:
        try:
            from transformers import GenerationConfig

            gen_eos = GenerationConfig.from_pretrained(base_path).eos_token_id
        except (OSError, ValueError):
            gen_eos = None
        return eos_ids(self.tokenizer, gen_eos)

    def encode_prompt(self, messages: Messages) -> list[int]:
        """Same rendering as HFPolicy.encode_prompt (policies/model_files.py)."""
        return encode_chat_prompt(self.tokenizer, messages, self.max_prompt_tokens)

    # --- sampling -------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        self._rng = np.random.default_rng(int(seed))
        self._last_seed = int(seed)

    def _vllm_sampling(self, sampling: SamplingParams, request_seed: int):
        greedy = sampling.temperature <= 0
        return self._vllm.SamplingParams(
            n=1,
            temperature=0.0 if greedy else float(sampling.temperature),
            top_p=1.0 if greedy else float(sampling.top_p),
            top_k=0 if greedy or not sampling.top_k or sampling.top_k < 0 else int(sampling.top_k),
            max_tokens=int(sampling.max_new_tokens),
            seed=None if greedy else request_seed,
            logprobs=0,  # the sampled token's logprob only
            stop_token_ids=sorted(self.eos_ids),
            stop=self.stop_strings or None,
            include_stop_str_in_output=True,  # the text stays the decode of the recorded ids
            skip_special_tokens=True,
            detokenize=bool(self.stop_strings),  # we decode ourselves; vLLM needs text only for stop strings
            ignore_eos=False,
        )

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        sampling = sampling or SamplingParams()
        if sampling.seed is not None and sampling.seed != self._last_seed:
            self.reseed(sampling.seed)
        prompt_ids = [self.encode_prompt(m) for m in prompts]
        return self.generate_ids(prompt_ids, sampling)

    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """Generate from token-id prompts. Every prompt gets its own seed drawn from this
        policy's generator, so a batch is reproducible and its rows are independent."""
        seeds = self._rng.integers(0, 2**31 - 1, size=len(prompt_ids))
        out: list[Completion | None] = [None] * len(prompt_ids)
        runnable: list[int] = []
        for i, ids in enumerate(prompt_ids):
            if not ids:
                out[i] = Completion("", prompt_ids=[], finish_reason="error", error="empty prompt")
            elif self.max_model_len and len(ids) >= self.max_model_len:
                out[i] = Completion("", prompt_ids=list(ids), finish_reason="error",
                                    error=f"prompt of {len(ids)} tokens does not fit vLLM max_model_len="
                                          f"{self.max_model_len}: raise it or set max_prompt_tokens")
            else:
                runnable.append(i)
        if not runnable:
            return out  # type: ignore[return-value]
        from vllm.inputs import TokensPrompt

        requests = [TokensPrompt(prompt_token_ids=list(prompt_ids[i])) for i in runnable]
        params = [self._vllm_sampling(sampling, int(seeds[i])) for i in runnable]
        if not self.on_cuda:
            # vLLM's CPU attention checks that the OpenMP thread count of the calling thread equals
            # the one its metadata was built for; a thread other than the one that set torch's
            # count (the gateway's server threads) starts with OpenMP's default and fails.
            import torch

            torch.set_num_threads(torch.get_num_threads())
        try:
            results = self.llm.generate(requests, params, use_tqdm=False, lora_request=self._lora_request)
        except Exception as exc:  # the engine failed: every episode of this call is an infra error
            message = f"vLLM generate failed: {type(exc).__name__}: {exc}".splitlines()[0]
            for i in runnable:
                out[i] = Completion("", prompt_ids=list(prompt_ids[i]), finish_reason="error", error=message)
            return out  # type: ignore[return-value]
        for i, result in zip(runnable, results):
            out[i] = self._completion(list(prompt_ids[i]), result)
        return out  # type: ignore[return-value]

    def _completion(self, prompt_ids: list[int], result) -> Completion:
        sample = result.outputs[0]
        response = list(sample.token_ids)
        if sample.finish_reason not in ("stop", "length"):
            return Completion("", prompt_ids=prompt_ids, response_ids=response, finish_reason="error",
                              error=f"vLLM request ended with finish_reason={sample.finish_reason!r}")
        entries = sample.logprobs or []
        if len(entries) != len(response):
            return Completion("", prompt_ids=prompt_ids, response_ids=response, finish_reason="error",
                              error=f"vLLM returned {len(entries)} logprobs for {len(response)} tokens")
        logprobs = [float(entry[token].logprob) for entry, token in zip(entries, response)]
        text = self.tokenizer.decode(response, skip_special_tokens=True)
        return Completion(text=text, prompt_ids=prompt_ids, response_ids=response, response_logprobs=logprobs,
                          finish_reason=sample.finish_reason)

    # --- weight sync ----------------------------------------------------------------------
    def sync_weights(self, weights: dict | Iterable[tuple[str, Any]]) -> float:
        """Load full weights in place (HF checkpoint names, e.g. a model's `state_dict()` or
        `named_parameters()`); returns the seconds it took.

        Every tensor of the checkpoint must be given (a tied lm_head may be left out): vLLM's
        in-place reload swaps layers to meta tensors while loading and a layer missing some of
        its tensors, or a load that fails half way, would leave the engine unusable. So names
        and shapes are checked against the served checkpoint before anything is touched."""
        import torch

        pairs = weights.items() if isinstance(weights, dict) else weights
        items = [(name, tensor.detach()) for name, tensor in pairs]
        self._check_full_weights(items)
        names = {name for name, _ in items}
        if self.tied_embeddings and "lm_head.weight" not in names:
            # The in-place reload gives embed_tokens a new tensor and leaves the tied lm_head on
            # the old one (vLLM 0.32), so the head is loaded explicitly with the same values.
            embed = next(t for n, t in items if n.endswith("embed_tokens.weight"))
            items.append(("lm_head.weight", embed))
        t0 = time.perf_counter()
        with torch.no_grad():
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(items)})
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        seconds = time.perf_counter() - t0
        self.sync_seconds.append(seconds)
        return seconds

    def _checkpoint_shapes(self) -> dict[str, tuple[int, ...]] | None:
        """Tensor names and shapes of the served checkpoint (local safetensors folders only)."""
        if getattr(self, "_shapes", None) is None:
            files = sorted(Path(self.base_path).expanduser().glob("*.safetensors"))
            if not files:
                return None
            from safetensors import safe_open

            shapes: dict[str, tuple[int, ...]] = {}
            for f in files:
                with safe_open(str(f), framework="pt") as handle:
                    for key in handle.keys():
                        shapes[key] = tuple(handle.get_slice(key).get_shape())
            self._shapes = shapes
        return self._shapes

    def _check_full_weights(self, items: list[tuple[str, Any]]) -> None:
        for name, _ in items:
            if name.startswith("base_model.model.") or ".lora_" in name:
                raise ConfigError(f"sync_weights got the PEFT tensor {name!r}: sync LoRA runs with sync_lora")
        shapes = self._checkpoint_shapes()
        if shapes is None:
            return
        given = {name: tuple(t.shape) for name, t in items}
        unknown = [n for n in given if n not in shapes and not n.endswith("lm_head.weight")]  # tied heads are not saved
        wrong = [n for n in given if n in shapes and given[n] != shapes[n]]
        missing = [n for n in shapes if n not in given and not n.endswith("lm_head.weight")]
        if unknown or wrong or missing:
            raise ConfigError(f"sync_weights needs the full checkpoint of {self.base_path}: unknown {unknown[:3]}, "
                              f"wrong shape {wrong[:3]}, missing {missing[:3]}")

    def sync_lora(self, adapter_dir: str | Path, copy: bool = True) -> float:
        """Serve the PEFT adapter saved in `adapter_dir` from the next generate on. vLLM caches
        adapters by id, so every sync gets a new id; `copy` snapshots the folder first so the
        trainer may overwrite it."""
        if not self.enable_lora:
            raise ConfigError("sync_lora needs VLLMPolicy(enable_lora=True)")
        from vllm.lora.request import LoRARequest

        t0 = time.perf_counter()
        source = Path(adapter_dir)
        if not (source / "adapter_config.json").is_file():
            raise ConfigError(f"{source} has no adapter_config.json: save the adapter with save_pretrained first")
        self._lora_id += 1
        if copy:
            if self._owned_lora_root is None:
                self._owned_lora_root = Path(tempfile.mkdtemp(prefix="agentgym_vllm_lora_"))
            target = self._owned_lora_root / f"adapter_{self._lora_id}"
            shutil.copytree(source, target)
            source = target
        previous = self._lora_request
        self._lora_request = LoRARequest(f"agentgym_{self._lora_id}", self._lora_id, str(source))
        self.llm.llm_engine.add_lora(self._lora_request)  # load now, so the sync time is measured here
        if previous is not None:
            self.llm.llm_engine.remove_lora(previous.lora_int_id)
        self.llm.reset_prefix_cache()
        if copy:
            self._lora_dirs.append(source)
            while len(self._lora_dirs) > 2:  # keep the served adapter and the one before it
                shutil.rmtree(self._lora_dirs.pop(0), ignore_errors=True)
        seconds = time.perf_counter() - t0
        self.sync_seconds.append(seconds)
        return seconds

    def sync_from(self, hf_policy) -> float:
        """Copy a trainer's HFPolicy weights into the engine: its LoRA adapter when it trains
        one, otherwise all its parameters."""
        if getattr(hf_policy, "is_lora", False):
            with tempfile.TemporaryDirectory(prefix="agentgym_lora_") as tmp:
                hf_policy.model.save_pretrained(tmp)
                return self.sync_lora(tmp, copy=True)
        return self.sync_weights(hf_policy.model.named_parameters())

    # --- memory ---------------------------------------------------------------------------
    def sleep(self, level: int = 1) -> None:
        """Free the engine's GPU memory for the trainer (CUDA with sleep mode; no-op on CPU)."""
        if self.sleep_supported:
            self.llm.sleep(level=level)

    def wake_up(self) -> None:
        if self.sleep_supported:
            self.llm.wake_up()

    def close(self) -> None:
        if self._owned_lora_root is not None:
            shutil.rmtree(self._owned_lora_root, ignore_errors=True)
            self._owned_lora_root = None
        engine = getattr(self, "llm", None)
        if engine is None:
            return
        self.llm = None
        VLLMPolicy._live_engines -= 1
        # An in-process engine's shutdown (also run when it is garbage-collected) tears down
        # vLLM's process-wide distributed state, which breaks every other engine still alive
        # here. So only the last one shuts down; one closed beside others is parked until exit.
        if VLLMPolicy._live_engines > 0:
            _PARKED_ENGINES.append(engine)
            return
        core = getattr(engine.llm_engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()


def engine_kwargs_for(trainer_policy, engine_kwargs: dict) -> dict:
    """VLLMPolicy arguments for an engine that serves a trainer's HFPolicy: LoRA on when the
    trainer trains an adapter (rank large enough for it), and the trainer's dtype, prompt limit
    and stop strings unless `engine_kwargs` sets them."""
    kwargs = dict(engine_kwargs)
    if getattr(trainer_policy, "is_lora", False):
        lora_rank = int(trainer_policy.model.peft_config["default"].r)
        kwargs.setdefault("enable_lora", True)
        kwargs["max_lora_rank"] = max(kwargs.get("max_lora_rank", 16), lora_rank)
    kwargs.setdefault("dtype", {"torch.float32": "fp32", "torch.bfloat16": "bf16",
                                "torch.float16": "fp16"}.get(str(trainer_policy.dtype), None))
    kwargs.setdefault("max_prompt_tokens", getattr(trainer_policy, "max_prompt_tokens", None))
    kwargs.setdefault("stop_strings", getattr(trainer_policy, "stop_strings", None))
    return kwargs


def adapter_files(peft_model) -> dict[str, bytes]:
    """A PEFT model's saved adapter as {file name: bytes}: what `sync_lora` reads, in a form that
    travels to another process or machine (a Ray replica) without a shared file system."""
    with tempfile.TemporaryDirectory(prefix="agentgym_lora_") as tmp:
        peft_model.save_pretrained(tmp)
        return {f.name: f.read_bytes() for f in Path(tmp).iterdir() if f.is_file()}


class VLLMRolloutPolicy(FollowsTrainer):
    """The rollout engine `policy.engine=vllm` (agentgym.policies.engines): generation for a
    trainer's HFPolicy on a vLLM engine. The trainer keeps its HFPolicy for everything else
    (model, tokenizer, reference, checkpoints). Before generating, the engine is synced from the trainer whenever
    the trainer's trainable parameters changed since the last sync: torch bumps a tensor's
    `_version` on every in-place write (optimizer steps, load_state_dict), so one sum over the
    parameters tells, without comparing weights. So the loop needs no explicit sync call, and
    a resumed run syncs the loaded checkpoint before its first rollout.

    The engine starts on the first generate (an SFT-only phase never starts it).
    """

    def __init__(self, trainer_policy, model_path: str | Path, **engine_kwargs: Any):
        self.trainer = trainer_policy
        self.model_path = str(model_path)
        self.engine_kwargs = dict(engine_kwargs)
        self.engine: VLLMPolicy | None = None
        self._synced_version: int | None = None
        self._pending_seed: int | None = None
        self._asleep_level = 0
        self.num_syncs = 0

    def _start_engine(self) -> VLLMPolicy:
        return VLLMPolicy(self.model_path, **engine_kwargs_for(self.trainer, self.engine_kwargs))

    def sync(self, force: bool = False) -> float:
        """Push the trainer's weights to the engine if they changed (or `force`); seconds spent."""
        if self.engine is None:
            self.engine = self._start_engine()
            if self._pending_seed is not None:
                self.engine.reseed(self._pending_seed)
        version = self.weights_version()
        if not force and version == self._synced_version:
            return 0.0
        seconds = self.engine.sync_from(self.trainer)
        self._synced_version = version
        self.num_syncs += 1
        return seconds

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        self.wake_up()
        self.sync()
        return self.engine.generate(prompts, sampling, contexts)

    def prefix_cache_hit_rate(self) -> float | None:
        return self.engine.prefix_cache_hit_rate() if self.engine is not None else None

    # --- what the rollout engine asks of a token-level policy (agentgym.continuation) ---------
    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams | None = None) -> list[Completion]:
        self.wake_up()
        self.sync()
        return self.engine.generate_ids(prompt_ids, sampling or SamplingParams())

    def reseed(self, seed: int) -> None:
        if self.engine is not None:
            self.engine.reseed(seed)
        else:
            self._pending_seed = int(seed)

    def sleep(self, level: int = 1) -> None:
        """Give the engine's GPU memory to the trainer until the next generate (CUDA; no-op on
        CPU). Level 1 keeps the weights in CPU memory; level 2 drops them (full-weight runs
        only: the next generate pushes all weights again)."""
        if self.engine is None or not self.engine.sleep_supported:
            return
        if level == 2 and self.engine.enable_lora:
            level = 1  # LoRA syncs only the adapter: the base weights must survive the sleep
        self.engine.sleep(level=level)
        self._asleep_level = level

    def wake_up(self) -> None:
        if self.engine is not None and self._asleep_level:
            self.engine.wake_up()
            if self._asleep_level == 2:
                self._synced_version = None  # weights were discarded: force a full sync
            self._asleep_level = 0

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def vllm_rollout_engine(trainer_policy, model_path: str, settings: EngineSettings) -> VLLMRolloutPolicy:
    """The registered builder of `policy.engine=vllm`: the `policy.vllm` section and the seed."""
    return VLLMRolloutPolicy(trainer_policy, model_path,
                             **{"seed": settings.seed, **settings.policy.vllm.policy_kwargs()})
