"""The update's matrix-multiply precision (`ppo.matmul_dtype`).

    fp32   the model's own dtype throughout (default)
    bf16   the update's forward runs under autocast to bfloat16 (the backward follows it): matrix
           multiplies in bf16 with fp32 accumulation, weights and optimizer state stay fp32, the
           log-softmax and the loss in fp32. Worth it only where the hardware multiplies bf16
           natively (AVX-512 BF16 or AMX on x86 CPUs, Ampere+ GPUs): twice the fp32 rate on the
           real model's shapes here (docs/real_model_speed.json). Elsewhere bf16 is emulated and
           slower, so it is refused in one line rather than run on a slow path.

The rollout keeps the model's dtype, so the first minibatch's ratio differs from 1 by bf16's
rounding of the logprobs (tests/trainers/test_precision.py states the tolerance).
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


def update_autocast(matmul_dtype: str, device: str | torch.device, cpuinfo: str | None = None):
    """The context the update's forward runs in: nullcontext for fp32, bf16 autocast where the device
    has native bf16 matrix multiplies, else ConfigError (one line naming the setting and the fix)."""
    if matmul_dtype == "fp32":
        return contextlib.nullcontext()
    if matmul_dtype != "bf16":
        raise ConfigError(f"ppo.matmul_dtype must be one of {', '.join(MATMUL_DTYPES)}, got {matmul_dtype!r}")
    kind = torch.device(device).type
    if kind == "cuda":
        if not torch.cuda.is_bf16_supported():
            raise ConfigError("ppo.matmul_dtype=bf16: this GPU has no bf16 matrix multiply; set ppo.matmul_dtype=fp32")
    elif kind == "cpu":
        if not cpu_has_bf16(cpuinfo):
            raise ConfigError("ppo.matmul_dtype=bf16: this CPU has no native bf16 matrix multiply (AVX-512 BF16 or "
                              "AMX), where bf16 would run slower than fp32; set ppo.matmul_dtype=fp32")
    else:
        raise ConfigError(f"ppo.matmul_dtype=bf16 is for CPU and CUDA devices, not {kind}; set ppo.matmul_dtype=fp32")
    return torch.autocast(kind, dtype=torch.bfloat16)
