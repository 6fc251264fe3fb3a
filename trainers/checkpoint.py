"""Checkpoints that resume exactly: model (or LoRA adapter), optimizer, scheduler, value and
progress heads, every RNG, and the trainer state (iteration, history).

Layout: <run_dir>/checkpoints/iter_000010/{model/, trainer.pt, state.json}; the file
<run_dir>/checkpoints/latest names the newest complete one. A checkpoint is written to a
temporary folder and renamed, so a crash mid-save never leaves a half checkpoint as latest.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


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
        "policy_rng": policy._generator.get_state(),
        "policy_last_seed": policy._last_seed,
    }, tmp / "trainer.pt")
    (tmp / "state.json").write_text(json.dumps(state, indent=1, default=float))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    (root / "latest.tmp").write_text(final.name)
    os.replace(root / "latest.tmp", root / "latest")
    for old in sorted(p for p in root.glob("iter_*") if p != final)[:-max(keep - 1, 0) or None]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    pointer = Path(run_dir) / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if path.is_dir() else None


def load_checkpoint(path: str | Path, policy, optimizer, scheduler, heads: dict, weights: bool = True) -> dict:
    """Restore everything in place; returns the trainer state dict. weights=False: the policy's
    weights were loaded already (before FSDP sharded them); a sharded optimizer state (None
    here) is loaded per rank by trainers.distributed."""
    path = Path(path)
    if weights:
        policy.load_weights(path / "model")
    blob = torch.load(path / "trainer.pt", weights_only=False)
    if blob["optimizer"] is not None:
        optimizer.load_state_dict(blob["optimizer"])
    if scheduler is not None and blob["scheduler"] is not None:
        scheduler.load_state_dict(blob["scheduler"])
    for name, head in heads.items():
        if head is not None and name in blob["heads"]:
            head.load_state_dict(blob["heads"][name])
    set_rng_state(blob["rng"])
    policy._generator.set_state(blob["policy_rng"])
    policy._last_seed = blob["policy_last_seed"]
    return json.loads((path / "state.json").read_text())
