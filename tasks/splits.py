"""Split manifests: JSONL files with one TaskSpec (and its id) per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from agentgym.errors import HeldoutTaskError, SplitFileError
from agentgym.safe_files import read_jsonl
from agentgym.tasks.spec import TaskSpec

TRAIN_SPLITS = ("train",)
HELDOUT_SPLITS = ("heldout", "heldout_unseen")


def save_split(path: str | Path, tasks: Iterable[TaskSpec]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for t in tasks:
            f.write(json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False) + "\n")


def load_split(path: str | Path) -> list[TaskSpec]:
    """The TaskSpecs of a split manifest; a missing file or a bad line is one SplitFileError line."""
    return [task for _, task in read_jsonl(path, "TaskSpec", '{"env_id": ..., "params": {...}, "seed": N}',
                                           TaskSpec.from_dict, SplitFileError, "split file")]


def is_heldout(task: TaskSpec, heldout_ids: set[str], reserved=None) -> bool:
    """Held out by id, by content (`agentgym.tasks.validation.heldout_keys(space)` holds both the ids and the
    `content_key`s of the held-out splits, so a relabelled or re-typed copy is caught), or by
    region (`reserved(task)`: the family's products / pairs / projects kept for held-out)."""
    if task.task_id in heldout_ids or task.content_key in heldout_ids:
        return True
    if reserved is not None:
        try:
            return bool(reserved(task))
        except (KeyError, TypeError, ValueError, AttributeError):
            return False
    return False


def refuse_heldout(tasks: Iterable[TaskSpec], heldout_ids: set[str], what: str = "training", reserved=None) -> None:
    """Raise if any task is held out (see `is_heldout`): held-out tasks are never trained on."""
    for t in tasks:
        if is_heldout(t, heldout_ids, reserved):
            raise HeldoutTaskError(
                f"task {t.task_id} ({t.env_id}) belongs to a held-out split (by id or content) or to a region "
                f"reserved for held-out evaluation and cannot be used for {what}: use the `train` split or tasks generated from it"
            )
