"""The JSONL files a user gives (split manifests, SearchQA corpora and question files) are read by
one reader (agentgym.safe_files.read_jsonl): a line nested too deeply to parse, a FIFO or a folder
in the file's place, a missing file and a malformed line are each one line of the caller's error,
naming the file (and the line), never a traceback or a hang."""

from __future__ import annotations

import json
import os

import pytest

from agentgym.errors import ConfigError, SplitFileError
from agentgym.safe_files import read_jsonl
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import load_split, save_split

DEEP = "[" * 100_000 + "]" * 100_000


def loaders():
    from agentgym.envs.search.corpus import load_corpus_jsonl
    from agentgym.envs.search.dataset import load_questions_jsonl

    good = {load_split: TaskSpec("agentgym/Household-v0", {"seed_layout": 1}, seed=0).to_dict(),
            load_corpus_jsonl: {"id": "d1", "title": "A", "text": "a text"},
            load_questions_jsonl: {"id": "q1", "question": "who?", "answer": "a"}}
    errors = {load_split: SplitFileError, load_corpus_jsonl: ConfigError, load_questions_jsonl: ConfigError}
    return [(load, good[load], errors[load]) for load in good]


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("index", range(3), ids=["split", "corpus", "questions"])
def test_a_line_nested_too_deeply_is_one_line_naming_the_file_and_line(tmp_path, index):
    load, good, error = loaders()[index]
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + DEEP + "\n")
    with pytest.raises(error) as err:
        load(path)
    assert f"{path}:3:" in one_line(err.value) and "nests too deeply" in str(err.value)


@pytest.mark.parametrize("index", range(3), ids=["split", "corpus", "questions"])
def test_a_fifo_or_a_folder_in_the_files_place_is_refused_at_once(tmp_path, index):
    load, _, error = loaders()[index]
    os.mkfifo(tmp_path / "pipe.jsonl")  # opened blocking, reading it would wait for a writer for good
    (tmp_path / "folder.jsonl").mkdir()
    for name, kind in (("pipe.jsonl", "a FIFO"), ("folder.jsonl", "a folder")):
        with pytest.raises(error) as err:
            load(tmp_path / name)
        assert kind in one_line(err.value) and name in str(err.value)
    with pytest.raises(error, match="does not exist"):
        load(tmp_path / "missing.jsonl")


def test_lines_are_parsed_in_order_with_their_numbers_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"n": 1}\n\n   \n{"n": 2}\n')
    assert list(read_jsonl(path, "row", '{"n": N}', lambda obj: obj["n"])) == [(1, 1), (4, 2)]
    path.write_text('{"n": 1}\n{"m": 2}\n')
    with pytest.raises(ConfigError, match=r'rows.jsonl:2: not a row \(KeyError: .n.\); each line must be \{"n": N\}'):
        list(read_jsonl(path, "row", '{"n": N}', lambda obj: obj["n"], ConfigError))


def test_a_split_round_trips(tmp_path):
    tasks = [TaskSpec("agentgym/Household-v0", {"seed_layout": i}, seed=i) for i in range(3)]
    save_split(tmp_path / "s.jsonl", tasks)
    assert load_split(tmp_path / "s.jsonl") == tasks
