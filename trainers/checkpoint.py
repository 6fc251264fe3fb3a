"""Checkpoints that resume exactly: model (or LoRA adapter), optimizer, scheduler, value and
progress heads, every RNG, and the trainer state (iteration, history).

Layout: <run_dir>/checkpoints/iter_000010/{model/, trainer.pt, state.json}; the file
<run_dir>/checkpoints/latest names the newest complete one. A checkpoint is written to a
temporary folder and renamed, so a crash mid-save never leaves a half checkpoint as latest.

Reading one never runs code from it: `trainer.pt`, `ranks.pt` and optimizer shards load with
`torch.load(weights_only=True)` (tensors, numbers, strings, containers, and numpy's RNG arrays:
nothing else can be unpickled). `latest_checkpoint` checks the whole checkpoint before a run
uses it (pointer, model files, trainer state, state.json), so a broken one is one line naming
it and what is wrong, raised before anything is built, written or removed.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from agentgym.errors import ConfigError

CHECKPOINT_NAME = re.compile(r"iter_\d{6,}")
# what numpy's RNG state (an ndarray of uint32) needs to unpickle; none of it can run code
_NUMPY_SAFE = [np.ndarray, np.dtype, type(np.dtype(np.uint32))]
try:
    _NUMPY_SAFE.append(np._core.multiarray._reconstruct)
except AttributeError:  # numpy < 2
    _NUMPY_SAFE.append(np.core.multiarray._reconstruct)
TRAINER_KEYS = ("optimizer", "scheduler", "heads", "rng", "policy_rng", "policy_last_seed")


class CheckpointError(ConfigError):
    """A checkpoint (or its `latest` pointer) that cannot be resumed from."""


def safe_load(path: str | Path, what: str = "checkpoint file", mmap: bool = False):
    """`torch.load` that cannot execute code; any unreadable file is one CheckpointError line.
    mmap=True maps the tensors instead of reading them (a check of a large optimizer state)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointError(f"{path}: the {what} is missing or unreadable ({exc.strerror or exc})") from None
    if size == 0:
        raise CheckpointError(f"{path}: the {what} is empty (an interrupted copy?); resume from an earlier "
                              "checkpoint or start again without --resume")
    try:
        with torch.serialization.safe_globals(_NUMPY_SAFE):
            return torch.load(path, weights_only=True, mmap=mmap)
    except Exception as exc:  # noqa: BLE001 - truncated, random or crafted bytes all end here
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if "Weights only load failed" in reason or "Unsupported global" in str(exc):
            reason = "it holds Python objects other than tensors and plain data, which are never unpickled"
        raise CheckpointError(f"{path}: the {what} cannot be read ({reason}); resume from an earlier checkpoint "
                              "or start again without --resume") from None


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def policy_sampling_state(policy) -> dict:
    """The policy's sampler under the keys checkpoints have always used (trainer.pt, ranks.pt)."""
    state = policy.sampling_state()
    return {"policy_rng": state["rng"], "policy_last_seed": state["last_seed"]}


def load_policy_sampling_state(policy, blob: dict) -> None:
    policy.load_sampling_state({"rng": blob["policy_rng"], "last_seed": blob["policy_last_seed"]})


def save_checkpoint(run_dir: str | Path, iteration: int, policy, optimizer, scheduler, heads: dict, state: dict,
                    keep: int = 2, model_state: dict | None = None, optimizer_shards: list[Path] | None = None) -> Path:
    """model_state: the weights to save when the policy's own are sharded; optimizer_shards:
    per-rank optimizer files (FSDP), moved in instead of the optimizer's state."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"iter_{iteration:06d}"
    tmp = root / f".tmp_iter_{iteration:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        if model_state is None:
            policy.save(tmp / "model")
        else:
            policy.save(tmp / "model", state_dict=model_state)
        for shard in optimizer_shards or []:
            shutil.move(str(shard), tmp / shard.name)
        torch.save({
            "optimizer": optimizer.state_dict() if optimizer_shards is None else None,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "heads": {name: head.state_dict() for name, head in heads.items() if head is not None},
            "rng": rng_state(),
            **policy_sampling_state(policy),
        }, tmp / "trainer.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1, default=float))
    except BaseException:
        # A full disk (or anything else) mid-write: the half-written folder goes, giving its space
        # back, and `latest` still names the last complete checkpoint.
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    (root / "latest.tmp").write_text(final.name)
    os.replace(root / "latest.tmp", root / "latest")
    for old in sorted(p for p in root.glob("iter_*") if p != final)[:-max(keep - 1, 0) or None]:
        shutil.rmtree(old, ignore_errors=True)
    return final


PREVIOUS_RUN_FILES = ("metrics.jsonl", "summary.json", "final_model", "trajectories", "evals")


def latest_checkpoint_name(run_dir: str | Path) -> str | None:
    """The folder name `checkpoints/latest` names, unchecked (None when there is none): for messages."""
    try:
        name = (Path(run_dir) / "checkpoints" / "latest").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name if name.startswith("iter_") and "/" not in name else None


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint `checkpoints/latest` names, checked whole (`check_checkpoint`). None only
    when the run dir holds no earlier run to resume: a resume never starts over on top of one
    (that would remove its files). Anything else wrong is a CheckpointError naming what and
    what to do."""
    run_dir = Path(run_dir)
    root = run_dir / "checkpoints"
    pointer = root / "latest"
    if not os.path.lexists(pointer):
        intact = sorted(p.name for p in root.glob("iter_*") if p.is_dir()) if root.is_dir() else []
        if intact:
            raise CheckpointError(f"{pointer} is missing but {root} holds {', '.join(intact)}: write the name of the "
                                  f"one to resume into it (e.g. `echo {intact[-1]} > {pointer}`)")
        if (run_dir / "config.yaml").is_file() and any((run_dir / n).exists() for n in PREVIOUS_RUN_FILES):
            raise CheckpointError(f"{run_dir} holds an earlier run with no checkpoint to resume from: start it again "
                                  "without --resume (that replaces its results) or use another --run-dir")
        return None
    if pointer.is_symlink() or not pointer.is_file():
        raise CheckpointError(f"{pointer} is not a regular file: write the name of a checkpoint folder into it "
                              f"(e.g. iter_000010)")
    try:
        raw = pointer.read_bytes()[:4096]
        name = raw.decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        name = None
    if not name or not CHECKPOINT_NAME.fullmatch(name):
        shown = repr(raw[:40]) if name is None else repr(name[:40])
        raise CheckpointError(f"{pointer} holds {shown}, not a checkpoint folder name like iter_000010: write the "
                              f"name of one of {root}'s iter_* folders into it")
    path = root / name
    try:
        is_dir = path.is_dir() and not path.is_symlink()
    except OSError:
        is_dir = False
    if not is_dir:
        raise CheckpointError(f"{pointer} names {name}, but {path} is not a folder (missing, or a link): write the "
                              f"name of an existing iter_* folder into {pointer}")
    check_checkpoint(path)
    return path


def check_checkpoint(path: str | Path) -> dict:
    """Everything a resume reads, read once before anything is built: model files present and
    intact, trainer.pt loadable without code and complete, state.json a mapping with a whole
    iteration. Returns the trainer state; raises CheckpointError naming the first problem."""
    path = Path(path)
    model = path / "model"
    if not model.is_dir():
        raise CheckpointError(f"{path}: its model folder is missing; resume from an earlier checkpoint or start "
                              "again without --resume")
    weights = sorted(model.glob("*.safetensors")) + sorted(model.glob("*.bin"))
    if not weights:
        raise CheckpointError(f"{path}: {model} holds no weights (*.safetensors or *.bin); resume from an earlier "
                              "checkpoint or start again without --resume")
    for file in weights:
        if file.suffix == ".safetensors":
            _check_safetensors(file)
    blob = safe_load(path / "trainer.pt", "trainer state", mmap=True)
    missing = [k for k in TRAINER_KEYS if not isinstance(blob, dict) or k not in blob]
    if missing:
        raise CheckpointError(f"{path / 'trainer.pt'}: the trainer state lacks {', '.join(missing)} (written by "
                              "something else?); resume from an earlier checkpoint or start again without --resume")
    state = _read_state(path / "state.json")
    return state


def _check_safetensors(file: Path) -> None:
    """The header parses and every tensor's bytes are inside the file (a truncated copy fails)."""
    import struct

    try:
        size = file.stat().st_size
        with open(file, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8 or n > 100 << 20:
                raise ValueError("header larger than the file")
            header = json.loads(f.read(n))
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        if 8 + n + end > size:
            raise ValueError(f"{size} bytes, the header needs {8 + n + end}")
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error, AttributeError, RecursionError) as exc:
        raise CheckpointError(f"{file}: the weights file is truncated or corrupt ({str(exc)[:120] or 'unreadable'}); "
                              "resume from an earlier checkpoint or start again without --resume") from None


def _read_state(file: Path) -> dict:
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{file} is missing; resume from an earlier checkpoint or start again without "
                              "--resume") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"{file} is not valid JSON ({str(exc)[:120]}); resume from an earlier checkpoint "
                              "or start again without --resume") from None
    it = state.get("iteration") if isinstance(state, dict) else None
    if type(it) is not int or it < 0 or not isinstance(state.get("evals", []), list):
        raise CheckpointError(f"{file} lacks a whole iteration >= 0 (or its evals list): not written by a trainer; "
                              "resume from an earlier checkpoint or start again without --resume")
    return state



def load_checkpoint(path: str | Path, policy, optimizer, scheduler, heads: dict, weights: bool = True) -> dict:
    """Restore everything in place; returns the trainer state dict. weights=False: the policy's
    weights were loaded already (before FSDP sharded them); a sharded optimizer state (None
    here) is loaded per rank by trainers.distributed."""
    path = Path(path)
    state = _read_state(path / "state.json")
    if weights:
        policy.load_weights(path / "model")
    blob = safe_load(path / "trainer.pt", "trainer state")
    try:
        if not isinstance(blob, dict):
            raise TypeError("not a mapping")
        if blob["optimizer"] is not None:
            optimizer.load_state_dict(blob["optimizer"])
        if scheduler is not None and blob["scheduler"] is not None:
            scheduler.load_state_dict(blob["scheduler"])
        for name, head in heads.items():
            if head is not None and name in blob["heads"]:
                head.load_state_dict(blob["heads"][name])
        set_rng_state(blob["rng"])
        load_policy_sampling_state(policy, blob)
    except (KeyError, ValueError, TypeError, RuntimeError, IndexError, AttributeError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: its trainer state does not fit this run ({first}): was the config changed "
                              "since it was saved (model, LoRA, estimator heads)? resume with the saved "
                              "config.yaml, or start again without --resume") from None
    return state


def check_resume(run_dir: str | Path, settings: dict) -> Path | None:
    """What `--resume` checks before anything runs: the latest checkpoint in run_dir (whole) and
    the settings it was saved with, against `settings` (this run's config, `TrainConfig.to_dict()`).
    None when the run dir holds no earlier run (a fresh start)."""
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        check_resume_config(run_dir, settings)
    return checkpoint


# settings that decide the shapes of what a checkpoint holds (weights, adapter, heads)
SHAPE_SETTINGS = ("policy.model", "policy.lora", "tiny.build", "tiny.vocab_size", "tiny.hidden", "tiny.layers",
                  "tiny.heads", "tiny.arch", "estimator.name", "sft.enabled")


def check_resume_config(run_dir: str | Path, settings: dict) -> None:
    """Before a resume: the settings that shape the checkpoint's tensors are those it was saved
    with (the run dir's config.yaml), else one line naming the ones that changed."""
    import yaml

    saved_file = Path(run_dir) / "config.yaml"
    try:
        saved = yaml.safe_load(saved_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # nothing to compare with (the checkpoint's own checks still apply)
    now = settings

    def get(d, dotted):
        for part in dotted.split("."):
            if not isinstance(d, dict) or part not in d:
                return None
            d = d[part]
        return d

    changed = [f"{k}: {get(saved, k)!r} -> {get(now, k)!r}" for k in SHAPE_SETTINGS if get(saved, k) != get(now, k)]
    if changed:
        raise CheckpointError(f"the checkpoints in {run_dir} were saved with other settings ({'; '.join(changed)}): "
                              f"resume with those of {saved_file}, or start again without --resume")
