"""HFPolicy: a transformers causal LM as an agentgym Policy (CPU fp32 or CUDA bf16, PEFT LoRA).

Generation is our own short sampling loop over the model's KV cache rather than
`model.generate`, because we need (a) the exact token ids sampled, (b) the logprob of each
sampled token, (c) a seedable torch.Generator, for reproducible rollouts and exact resume.

Recorded logprobs: `response_logprobs[i] = log softmax(logits)[token_i]` of the raw model
logits, i.e. the policy at temperature 1 without top-p/top-k, whatever the sampling settings.
That is the distribution the PPO ratio is taken against; when sampling at temperature 1 and
top_p 1 it is also exactly the sampling distribution. The trainer may recompute them anyway
(`ppo.recompute_old_logprobs`) where numerics differ (bf16, batched vs unbatched).

Reference for KL: with LoRA the same model with the adapter disabled (no second copy);
without LoRA an optional frozen deep copy (`reference="copy"`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from agentgym.errors import ConfigError
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext
from agentgym.policies.model_files import check_model_path, encode_chat_prompt, eos_ids

DEFAULT_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}


def _resolve_dtype(dtype: Any, device: str) -> torch.dtype:
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
                "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}[str(dtype)]
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}; choose fp32, bf16 or fp16") from None


class HFPolicy:
    def __init__(
        self,
        model: str | Path,
        device: str = "cpu",
        dtype: Any = None,
        lora: dict | None = None,
        reference: str | None = None,
        max_prompt_tokens: int | None = None,
        stop_strings: list[str] | None = None,
        trust_remote_code: bool = False,
    ):
        """model: a local HF folder (full model, or a PEFT adapter folder whose config names its
        base) or a hub id already in the local cache. lora: LoraConfig kwargs to add a fresh
        adapter ({} = DEFAULT_LORA). reference: None, or "copy" for a frozen copy when there is
        no LoRA (with LoRA the reference is always the base with the adapter disabled)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = str(model)
        check_model_path(model)
        self.device = torch.device(device)
        self.dtype = _resolve_dtype(dtype, device)
        adapter_dir = Path(model).expanduser()
        is_adapter = (adapter_dir / "adapter_config.json").is_file()
        try:
            if is_adapter:
                from peft import PeftConfig, PeftModel

                base_path = PeftConfig.from_pretrained(str(adapter_dir)).base_model_name_or_path
                base = AutoModelForCausalLM.from_pretrained(base_path, dtype=self.dtype,
                                                            trust_remote_code=trust_remote_code)
                net = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
            else:
                net = AutoModelForCausalLM.from_pretrained(model, dtype=self.dtype, trust_remote_code=trust_remote_code)
            tok_src = model if (adapter_dir / "tokenizer_config.json").is_file() or not is_adapter else base_path
            self.tokenizer = AutoTokenizer.from_pretrained(tok_src, trust_remote_code=trust_remote_code)
        except OSError as exc:
            raise ConfigError(f"cannot load model {model!r}: {exc}".splitlines()[0]) from None
        if lora is not None and not is_adapter:
            from peft import LoraConfig, get_peft_model

            net = get_peft_model(net, LoraConfig(task_type="CAUSAL_LM", **{**DEFAULT_LORA, **lora}))
        self.model = net.to(self.device)
        self.model.eval()
        self.is_lora = is_adapter or lora is not None
        self._set_up_generation(max_prompt_tokens, stop_strings)
        if reference == "copy" and not self.is_lora:
            self.reference_model = copy.deepcopy(self.model).eval().requires_grad_(False)

    @classmethod
    def from_loaded(cls, model, tokenizer, max_prompt_tokens: int | None = None,
                    stop_strings: list[str] | None = None) -> "HFPolicy":
        """A policy over a model already in memory, shared rather than copied (e.g. the model a
        TRL trainer is updating): generation sees every update the owner makes."""
        self = cls.__new__(cls)
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.is_lora = hasattr(model, "disable_adapter") and hasattr(model, "peft_config")
        self._set_up_generation(max_prompt_tokens, stop_strings)
        return self

    def _set_up_generation(self, max_prompt_tokens: int | None, stop_strings: list[str] | None) -> None:
        """What both constructors share once model and tokenizer are there: left padding for batched
        generation, the stop ids and strings, no reference model, a seeded sampling generator."""
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_ids = self._eos_ids()
        self.max_prompt_tokens = max_prompt_tokens
        self.stop_strings = list(stop_strings or [])
        self.reference_model = None
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(0)
        self._last_seed: int | None = None

    # --- tokens ---------------------------------------------------------------------------
    def _eos_ids(self) -> set[int]:
        return eos_ids(self.tokenizer, getattr(getattr(self.model, "generation_config", None), "eos_token_id", None))

    def encode_prompt(self, messages: Messages) -> list[int]:
        return encode_chat_prompt(self.tokenizer, messages, self.max_prompt_tokens)

    def encode_response(self, text: str, add_eos: bool = True) -> list[int]:
        """Tokens of a target reply (SFT); generated replies keep their sampled ids instead."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return list(ids) + ([self.tokenizer.eos_token_id] if add_eos else [])

    # --- sampling -------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        self._generator.manual_seed(int(seed))
        self._last_seed = int(seed)

    @torch.inference_mode()
    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None, batch_size: int = 64) -> list[Completion]:
        sampling = sampling or SamplingParams()
        if sampling.seed is not None and sampling.seed != self._last_seed:
            self.reseed(sampling.seed)
        out: list[Completion] = []
        for start in range(0, len(prompts), batch_size):
            prompt_ids = [self.encode_prompt(m) for m in prompts[start:start + batch_size]]
            out.extend(self.generate_ids(prompt_ids, sampling))
        return out

    @torch.inference_mode()
    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        was_training = self.model.training
        self.model.eval()
        try:
            return self._sample(prompt_ids, sampling)
        finally:
            self.model.train(was_training)

    def _sample(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        batch = len(prompt_ids)
        width = max(len(p) for p in prompt_ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((batch, width), pad, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        for i, ids in enumerate(prompt_ids):  # left padding: every prompt ends at the last column
            input_ids[i, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[i, width - len(ids):] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)

        responses: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        finished = torch.zeros(batch, dtype=torch.bool, device=self.device)
        reasons = ["length"] * batch
        eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        past = None
        step_ids, step_pos = input_ids, positions
        for _ in range(sampling.max_new_tokens):
            out = self.model(input_ids=step_ids, attention_mask=attention, position_ids=step_pos,
                             past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            token = self._pick(logits, sampling)
            token_logprob = torch.log_softmax(logits, dim=-1).gather(-1, token[:, None])[:, 0]
            for i in torch.nonzero(~finished).flatten().tolist():
                responses[i].append(int(token[i]))
                logprobs[i].append(float(token_logprob[i]))
            hit_eos = torch.isin(token, eos) & ~finished
            for i in torch.nonzero(hit_eos).flatten().tolist():
                reasons[i] = "stop"
            finished |= hit_eos
            if self.stop_strings:
                for i in torch.nonzero(~finished).flatten().tolist():
                    tail = self.tokenizer.decode(responses[i][-8:])
                    if any(s in tail for s in self.stop_strings):
                        finished[i] = True
                        reasons[i] = "stop"
            if bool(finished.all()):
                break
            # Finished rows keep being fed (pad) so the batch stays rectangular; their tokens are dropped.
            step_ids = torch.where(finished, torch.full_like(token, pad), token)[:, None]
            step_pos = step_pos[:, -1:] + 1
            attention = torch.cat([attention, torch.ones((batch, 1), dtype=attention.dtype, device=self.device)], 1)
        return [
            Completion(text=self.tokenizer.decode(r, skip_special_tokens=True), prompt_ids=list(p), response_ids=r,
                       response_logprobs=lp, finish_reason=why)
            for p, r, lp, why in zip(prompt_ids, responses, logprobs, reasons)
        ]

    def _pick(self, logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
        if sampling.temperature <= 0:
            return logits.argmax(-1)
        scaled = logits / sampling.temperature
        if sampling.top_k and sampling.top_k > 0:
            kth = torch.topk(scaled, min(sampling.top_k, scaled.shape[-1]), dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probs = torch.softmax(scaled, dim=-1)
        if sampling.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            # keep the smallest prefix whose mass reaches top_p (always at least the top token)
            drop = sorted_p.cumsum(-1) - sorted_p >= sampling.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        gen = self._generator if probs.device.type == self._generator.device.type else None
        return torch.multinomial(probs, 1, generator=gen)[:, 0]

    # --- as the rollout engine "hf" (agentgym.policies.engines) ------------------------------
    def sync(self, force: bool = False) -> float:
        return 0.0  # it generates with the very weights the trainer updates

    def sleep(self, level: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    # --- training support -----------------------------------------------------------------
    def reference_forward(self, **kwargs):
        """The frozen reference model's forward pass (no gradients), called like the model."""
        with torch.no_grad():
            if self.is_lora:
                with self.model.disable_adapter():
                    return self.model(**kwargs)
            if self.reference_model is None:
                raise ConfigError("no reference model: set policy.reference=copy or use LoRA to train with a KL term")
            return self.reference_model(**kwargs)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    def save(self, out_dir: str | Path, state_dict: dict | None = None) -> None:
        """Full model, or only the LoRA adapter (PEFT's adapter_config.json + adapter_model.safetensors).
        state_dict: the weights to write instead of the model's own (the trainer's FSDP shards gathered)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out, state_dict=state_dict)
        self.tokenizer.save_pretrained(out)

    def load_weights(self, model_dir: str | Path) -> None:
        """Load weights saved by `save` into this policy, in place (resume keeps optimizer refs valid)."""
        from safetensors.torch import load_file

        model_dir = Path(model_dir)
        if self.is_lora:
            from peft import set_peft_model_state_dict

            state = load_file(str(model_dir / "adapter_model.safetensors"))
            set_peft_model_state_dict(self.model, state)
            return
        files = sorted(model_dir.glob("model*.safetensors"))
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        # tied embeddings: lm_head.weight is not saved separately
        missing = [k for k in missing if not k.endswith("lm_head.weight")]
        if missing or unexpected:
            raise RuntimeError(f"checkpoint mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
