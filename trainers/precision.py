"""The update's matrix-multiply precision (`ppo.matmul_dtype`).

    fp32   the model's own dtype throughout (default)
    bf16   the update's forward runs under autocast to bfloat16 (the backward follows it): matrix
           multiplies in bf16 with fp32 accumulation, weights and optimizer state stay fp32, the
           log-softmax and the loss in fp32. Worth it only where the hardware multiplies bf16
           natively (AVX-512 BF16 or AMX on x86 CPUs, Ampere+ GPUs): twice the fp32 rate on the
           real model's shapes here (docs/real_model_speed.json). Elsewhere bf16 is emulated and
           slower, so it is refused in one line rather than run on a slow path.

With LoRA (and the policy playing its own rollouts) the frozen base is stored in bf16 and the
rollout runs in bf16 too (`bf16_rollout`): the first minibatch's ratio is then 1 up to kernel
differences. With full fine-tuning the rollout keeps the model's dtype and the ratio differs from
1 by bf16's rounding of the logprobs (tests/trainers/test_precision.py states both tolerances).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from agentgym.errors import ConfigError

MATMUL_DTYPES = ("fp32", "bf16")
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this x86 CPU multiplies bf16 natively (its /proc/cpuinfo flags; False where unknown)."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    flags = {word for line in cpuinfo.splitlines() if line.startswith("flags") for word in line.split()}
    return any(flag in flags for flag in _BF16_CPU_FLAGS)


def update_autocast(matmul_dtype: str, device: str | torch.device, cpuinfo: str | None = None,
                    setting: str = "ppo.matmul_dtype"):
    """The context the update's forward runs in: nullcontext for fp32, bf16 autocast where the device
    has native bf16 matrix multiplies, else ConfigError (one line naming `setting` and the fix)."""
    if matmul_dtype == "fp32":
        return contextlib.nullcontext()
    if matmul_dtype != "bf16":
        raise ConfigError(f"{setting} must be one of {', '.join(MATMUL_DTYPES)}, got {matmul_dtype!r}")
    kind = torch.device(device).type
    if kind == "cuda":
        if not torch.cuda.is_bf16_supported():
            raise ConfigError(f"{setting}=bf16: this GPU has no bf16 matrix multiply; set {setting}=fp32")
    elif kind == "cpu":
        if not cpu_has_bf16(cpuinfo):
            raise ConfigError(f"{setting}=bf16: this CPU has no native bf16 matrix multiply (AVX-512 BF16 or "
                              f"AMX), where bf16 would run slower than fp32; set {setting}=fp32")
    else:
        raise ConfigError(f"{setting}=bf16 is for CPU and CUDA devices, not {kind}; set {setting}=fp32")
    return torch.autocast(kind, dtype=torch.bfloat16)


def bf16_rollout(matmul_dtype: str, policy, engine: str, data_parallel: bool = False) -> str | None:
    """ppo.matmul_dtype=bf16 with a LoRA policy that plays its own rollouts (policy.engine=hf or pool, one
    process): its frozen base is stored in bf16 and the rollout runs in bf16 too
    (HFPolicy.keep_base_in_bf16), so the update recomputes the sampled tokens' logprobs with the
    weights that sampled them. Elsewhere the rollout stays in the model's dtype. Returns the one
    line to log about it (None for fp32); refuses bf16 without native bf16 first."""
    if matmul_dtype != "bf16":
        return None
    update_autocast(matmul_dtype, policy.device)
    fallback = ("the update runs in bf16 but the rollout stays in the model's dtype, so the first PPO ratio is off 1 "
                "by bf16's rounding (about 1.03 on a 30-layer model)")
    if not getattr(policy, "is_lora", False):
        return f"ppo.matmul_dtype=bf16 with full fine-tuning: {fallback}; policy.lora={{}} runs the rollout in bf16 too"
    from agentgym.policies.engines import generates_with_trainer_model

    if not generates_with_trainer_model(engine) or data_parallel:  # hf, pool: the trainer's own model samples
        where = f"policy.engine={engine}" if not generates_with_trainer_model(engine) else "data-parallel ranks"
        return f"ppo.matmul_dtype=bf16 with {where}: {fallback}"
    cast = policy.keep_base_in_bf16()
    return f"ppo.matmul_dtype=bf16: LoRA's frozen base ({cast / 1e6:.1f}M parameters) kept in bf16, rollout and update alike"
