"""load_trajectories (public API) on a file that cannot be read: each problem is one
TrajectoryFileError line naming the file (and the line), never a bare JSONDecodeError, KeyError or
AttributeError traceback, and a FIFO is refused instead of waited on. The error is still an
OSError and a ValueError, so code that caught the old open and JSON errors keeps working."""

from __future__ import annotations

import json
import os

import pytest

from agentgym import Step, Trajectory, load_trajectories, save_trajectories
from agentgym.trajectory import TrajectoryFileError


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_saved_file_loads_back(tmp_path):
    path = tmp_path / "t.jsonl"
    saved = [Trajectory("t1", "g", steps=[Step("obs", "a", action="go")], success=True)]
    save_trajectories(path, saved)
    assert load_trajectories(path) == saved


@pytest.mark.parametrize("line,why", [
    ("[]", "a JSON object was expected, not list"),
    ('{"task_id": "t", "group_id": "g", "steps": "ab"}', "its steps must be a list of JSON objects"),
    ('{"task_id": "t", "group_id": "g", "steps": [1]}', "its steps must be a list of JSON objects"),
    ('{"group_id": "g"}', "task_id"),
    ('{"task_id": "t", "gr', "JSONDecodeError"),
    ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
], ids=["list", "steps-text", "steps-numbers", "no-task-id", "torn", "deep"])
def test_a_bad_line_is_one_line_naming_the_file_and_line(tmp_path, line, why):
    path = tmp_path / "t.jsonl"
    good = json.dumps(Trajectory("t1", "g").to_dict())
    path.write_text(good + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(TrajectoryFileError) as info:
        load_trajectories(path)
    text = one_line(info.value)
    assert text.startswith(f"{path}:3: not a trajectory") and why in text


def test_a_missing_file_is_still_an_oserror(tmp_path):
    with pytest.raises(OSError, match="trajectories file .* does not exist: pass a JSONL file of trajectory lines"):
        load_trajectories(tmp_path / "none.jsonl")


def test_a_bad_line_is_still_a_valueerror(tmp_path):
    (tmp_path / "t.jsonl").write_text("not json\n", encoding="utf-8")
    with pytest.raises(ValueError):
        load_trajectories(tmp_path / "t.jsonl")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(TrajectoryFileError, match="is a FIFO, not a regular file"):
        load_trajectories(fifo)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(TrajectoryFileError, match="is a folder"):
        load_trajectories(tmp_path)
