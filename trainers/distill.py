"""On-policy distillation (`distill.teacher`): the student samples, a teacher scores its tokens.

The student (the policy being trained) plays the env as in RL; a frozen teacher, any model a path,
hub id or catalog name gives, scores every token the student sampled in one no-grad pass per batch
(micro-batched as ppo.micro_batch_size). The learning signal of token t is the per-token reverse KL
of the sampled token, optionally mixed with the env's advantage (the run's estimator):

    A_t = -(log pi_student(t) - log pi_teacher(t)) + reward_coef * A_env_t

log pi_student(t) is the logprob the student's rollout recorded for the token (the PPO ratio's
denominator). In expectation over the student's tokens the first term is -KL(pi_student || pi_teacher)
at that prefix: raising the probability of tokens by their advantage lowers the reverse KL, token by
token, without the teacher ever generating (Agarwal et al. 2024, GKD; Lu & Thinking Machines 2025,
"On-policy distillation": a per-token, undiscounted reverse KL as the advantage). The update is the
run's policy loss (PPO-clip by default) on A.

Refused in one line before the teacher's weights load: a teacher whose vocabulary differs from the
student's (its logprobs would be of other tokens), and a teacher larger than the memory left on the
device. ppo.drop_abs_adv_below applies to A_t per token (a token whose env advantage is 0 still
carries the KL signal).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from agentgym.errors import ConfigError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
FILE_DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}
HEADROOM = 1.2  # the teacher's activations and the allocator's slack on top of its weights


@dataclass
class DistillConfig:
    teacher: str = ""  # a model folder, hub id or catalog name; empty: no distillation
    reward_coef: float = 0.0  # weight of the env advantage mixed into the KL signal (0: pure distillation)

    def __post_init__(self) -> None:
        if not (isinstance(self.reward_coef, (int, float)) and math.isfinite(self.reward_coef)
                and self.reward_coef >= 0):
            raise ConfigError(f"distill.reward_coef={self.reward_coef!r} is out of range: the env advantage's weight, "
                              ">= 0 (0: pure distillation)")

    @property
    def enabled(self) -> bool:
        return bool(self.teacher)


def reverse_kl_advantages(student_logp: np.ndarray, teacher_logp: np.ndarray, env_adv: np.ndarray,
                          mask: np.ndarray, reward_coef: float) -> np.ndarray:
    """A_t = -(student_logp_t - teacher_logp_t) + reward_coef * env_adv_t where mask_t, else 0."""
    on = np.asarray(mask, dtype=bool)
    kl = np.asarray(student_logp, np.float64) - np.asarray(teacher_logp, np.float64)
    return np.where(on, -kl + reward_coef * np.asarray(env_adv, np.float64), 0.0)


def distill_samples(samples: list, teacher_logprobs: Sequence[np.ndarray], reward_coef: float,
                    drop_abs_adv_below: float = 0.0) -> tuple[list, dict]:
    """The samples with their advantages replaced by `reverse_kl_advantages` (teacher_logprobs: per
    sample, aligned with input_ids); tokens with |A| < drop_abs_adv_below leave the loss, samples left
    with no loss token are dropped. Returns them and the iteration's `distill/` metrics."""
    out, kls, teacher_all = [], [], []
    for sample, teacher in zip(samples, teacher_logprobs):
        mask = np.asarray(sample.loss_mask, dtype=bool)
        adv = reverse_kl_advantages(np.asarray(sample.old_logprobs), teacher, np.asarray(sample.advantages), mask,
                                    reward_coef)
        kls.append((np.asarray(sample.old_logprobs, np.float64) - teacher)[mask])
        teacher_all.append(np.asarray(teacher, np.float64)[mask])
        keep = mask & (np.abs(adv) >= drop_abs_adv_below)
        sample.advantages = adv.tolist()
        sample.loss_mask = keep.astype(int).tolist()
        if keep.any() or sample.value_targets:
            out.append(sample)
    kl = np.concatenate(kls) if kls else np.zeros(0)
    metrics = {"reverse_kl_mean": float(kl.mean()) if len(kl) else 0.0,
               "teacher_logp_mean": float(np.concatenate(teacher_all).mean()) if len(kl) else 0.0,
               "tokens": int(len(kl))}
    return out, metrics


# --- the teacher --------------------------------------------------------------------------------
def same_vocabulary(student_tokenizer, teacher_tokenizer) -> str | None:
    """None when both map every token string to the same id, else a short account of the difference."""
    a, b = student_tokenizer.get_vocab(), teacher_tokenizer.get_vocab()
    if a == b:
        return None
    differ = sum(1 for tok, i in a.items() if b.get(tok) != i) + sum(1 for tok in b if tok not in a)
    return f"{len(b)} tokens against the student's {len(a)}, {differ} of them differing"


def weight_bytes(folder: Path) -> tuple[int, int] | None:
    """(bytes of the weight files in `folder`, bytes per parameter in them); None when unknown."""
    files = [f for f in folder.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES)]
    if not files:
        return None
    per = 4
    config = folder / "config.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
            per = FILE_DTYPE_BYTES.get(str(data.get("torch_dtype") or data.get("dtype") or "float32"), 4)
        except (OSError, ValueError):
            pass
    return sum(f.stat().st_size for f in files), per


def free_memory_bytes(device) -> int | None:
    """What the device has free now: CUDA's free memory, or the host's MemAvailable; None when unknown."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_teacher_fits(name: str, needed: int, free: int | None, device) -> None:
    """One line when the teacher's weights (`needed` bytes as loaded) and headroom exceed `free`."""
    if free is not None and needed * HEADROOM > free:
        raise ConfigError(f"distill.teacher {name} needs about {needed * HEADROOM / 2**30:.1f} GiB on {device} and "
                          f"{free / 2**30:.1f} GiB is free: use a smaller teacher, or a device with more memory")


def _local_folder(model: str) -> Path | None:
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(model, "config.json")
    return Path(found).parent if isinstance(found, str) else None


class Teacher:
    """A frozen model that scores the student's samples: per sample, the logprob of each token."""

    def __init__(self, policy):
        self.policy = policy
        policy.model.requires_grad_(False)

    def score(self, samples: Sequence, micro_batch_size: int) -> list[np.ndarray]:
        """Per sample, aligned with its input_ids (position 0: 0), the teacher's logprob of each token
        where the student's policy is (renormalized like it under admissible-only decoding)."""
        from agentgym.trainers.learner import score_sequences

        scored = score_sequences(self.policy, samples, micro_batch_size, want_hidden=False)
        return [np.concatenate([[0.0], logp.numpy().astype(np.float64)]) for logp, _ in scored]


def _tokenizer(model: str, what: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what} {model!r}: cannot read its tokenizer ({str(exc).splitlines()[0][:120]})") from None


def check_teacher(cfg: DistillConfig, student_tokenizer, device, dtype=None) -> str:
    """The two refusals of the module docstring, from the teacher's tokenizer and file sizes alone
    (its weights are not loaded); returns the teacher's resolved model path."""
    import torch

    from agentgym.policies.hf import _resolve_dtype
    from agentgym.policies.model_files import resolve_model

    resolved = resolve_model(cfg.teacher, what="distill.teacher")
    if isinstance(student_tokenizer, str):
        student_tokenizer = _tokenizer(resolve_model(student_tokenizer, what="policy.model"), "policy.model")
    if (why := same_vocabulary(student_tokenizer, _tokenizer(resolved, "distill.teacher"))) is not None:
        raise ConfigError(f"distill.teacher {cfg.teacher!r} has another vocabulary than the student ({why}): the "
                          "per-token KL compares the same token ids, so teacher and student must share a tokenizer")
    folder = _local_folder(resolved)
    if folder is not None and (size := weight_bytes(folder)) is not None:
        file_bytes, per = size
        loaded = torch.tensor([], dtype=_resolve_dtype(dtype, str(device))).element_size()
        check_teacher_fits(cfg.teacher, file_bytes // per * loaded, free_memory_bytes(device), device)
    return resolved


def load_teacher(cfg: DistillConfig, student, dtype=None, log: Callable[[str], None] = print) -> Teacher | None:
    """The teacher of `cfg` on the student's device (`check_teacher` first); None without distillation."""
    if not cfg.enabled:
        return None
    from agentgym.policies.hf import HFPolicy

    resolved = check_teacher(cfg, student.tokenizer, student.device, dtype)
    teacher = HFPolicy(resolved, device=str(student.device), dtype=dtype)
    log(f"distill.teacher {cfg.teacher}: {sum(p.numel() for p in teacher.model.parameters()) / 1e6:.1f}M parameters "
        f"score the student's tokens (reward_coef={cfg.reward_coef:g})")
    return Teacher(teacher)


__all__ = ["DistillConfig", "Teacher", "check_teacher", "check_teacher_fits", "distill_samples", "load_teacher",
           "reverse_kl_advantages", "same_vocabulary"]
