"""User corpora and question files (and HotpotQA through the converter) play like the world."""

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym.envs.search.env import SearchQAEnv
from agentgym.envs.search.hotpotqa import convert_hotpotqa
from agentgym.errors import ConfigError
from agentgym.tasks.validation import validate

DOCS = [
    {"id": "d1", "title": "Ada Quill", "text": "Ada Quill is a cartographer born in Brenmoor. She drew the Salt Atlas."},
    {"id": "d2", "title": "Brenmoor", "text": "Brenmoor is a river town. Its mayor is Otto Fenn."},
    {"id": "d3", "title": "Otto Fenn", "text": "Otto Fenn was born in 1931 and keeps bees."},
    {"id": "d4", "text": "A document without a title about bees and rivers."},
]
QUESTIONS = [
    {"id": "q1", "question": "Who is the mayor of the town where Ada Quill was born?", "answer": "Otto Fenn",
     "supporting": ["d1", "d2"], "type": "bridge"},
    {"id": "q2", "question": "When was the mayor of Brenmoor born?", "answer": ["1931", "in 1931"],
     "supporting": ["Brenmoor", "d3"], "type": "bridge", "split": "heldout"},
    {"id": "q3", "question": "What did Ada Quill draw?", "answer": "the Salt Atlas", "supporting": ["d1"]},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    return _write(tmp_path / "corpus.jsonl", DOCS), _write(tmp_path / "questions.jsonl", QUESTIONS)


def test_user_files_play_like_the_world(files):
    corpus, questions = files
    env = SearchQAEnv(corpus_path=corpus, questions_path=questions)
    check_env(env, skip_render_check=True)
    space = env.task_space
    assert [t.params["question_id"] for t in space.split("heldout")] == ["q2"]
    assert {t.params["question_id"] for t in space.split("train")} == {"q1", "q3"}
    for name in ("train", "heldout"):
        for task in space.split(name):
            assert validate(space, task)
    obs, info = env.reset(options={"task": space.split("heldout")[0]})
    assert "mayor of Brenmoor" in obs and info["admissible_actions"] is None
    obs, *_ = env.step("search[mayor Brenmoor]")
    assert "[d2] Brenmoor" in obs
    *_, info = env.step("answer[in 1931]")
    assert info["success"]
    assert space.category(space.split("train")[0]) == "bridge/2hop"
    assert space.sample(np.random.default_rng(0)).task_id in {t.task_id for t in space.split("train")}


def test_a_custom_id_registers_in_one_call(files):
    corpus, questions = files
    env_id = agentgym.register_env("MySearch-v0", "agentgym.envs.search.env:SearchQAEnv", max_episode_steps=8,
                                   corpus_path=str(corpus), questions_path=str(questions))
    space = agentgym.get_task_space(env_id)
    task = space.split("train")[0]
    assert task.env_id == env_id
    env = gym.make(env_id)
    _, info = env.reset(options={"task": task.task_id})
    assert info["task_id"] == task.task_id


def test_inline_questions_need_only_a_corpus(files):
    corpus, _ = files
    env = SearchQAEnv(corpus_path=corpus)
    from agentgym.tasks.spec import TaskSpec

    task = TaskSpec("agentgym/SearchQA-v0", {"question": "Who keeps bees?", "answers": ["Otto Fenn"],
                                             "supporting": ["d3"]})
    env.reset(options={"task": task})
    obs, *_ = env.step("open[d4]")
    assert obs.startswith("[d4] d4")  # the id stands in for a missing title
    *_, info = env.step("answer[otto fenn]")
    assert info["success"]


@pytest.mark.parametrize("rows, message", [
    (["not json"], "not a document"),
    ([{"title": "no id", "text": "x"}], "not a document"),
    ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "duplicate document id"),
    ([], "no documents"),
])
def test_bad_corpus_files_are_one_clear_error(tmp_path, rows, message):
    path = tmp_path / "c.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    with pytest.raises(ConfigError, match=message):
        SearchQAEnv(corpus_path=path)


def test_bad_question_files_and_arguments(files, tmp_path):
    corpus, _ = files
    bad = _write(tmp_path / "q.jsonl", [{"id": "q", "question": "?"}])
    with pytest.raises(ConfigError, match="not a question"):
        SearchQAEnv(corpus_path=corpus, questions_path=bad)
    bad = _write(tmp_path / "q2.jsonl", [dict(QUESTIONS[0], split="dev")])
    with pytest.raises(ConfigError, match="split must be"):
        SearchQAEnv(corpus_path=corpus, questions_path=bad)
    with pytest.raises(ConfigError, match="does not exist"):
        SearchQAEnv(corpus_path=tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="needs corpus_path"):
        SearchQAEnv(questions_path=bad)
    with pytest.raises(ConfigError, match="top_k"):
        SearchQAEnv(top_k=0)


def test_hotpotqa_conversion(tmp_path):
    hotpot = [{
        "_id": "5a8b57f25542995d1e6f1371", "type": "comparison", "level": "easy",
        "question": "Which river is longer, the Anvel or the Brisk?", "answer": "Anvel",
        "supporting_facts": [["Anvel", 0], ["Brisk", 1], ["Anvel", 1]],
        "context": [["Anvel", ["The Anvel is a river. ", "It is 400 km long."]],
                    ["Brisk", ["The Brisk is a stream. ", "It is 12 km long."]],
                    ["Cobb", ["Cobb is a hill."]]],
    }]
    src = tmp_path / "hotpot.json"
    src.write_text(json.dumps(hotpot))
    corpus, questions = convert_hotpotqa(src, tmp_path / "out")
    rows = [json.loads(line) for line in questions.read_text().splitlines()]
    assert rows[0]["supporting"] == ["Anvel", "Brisk"] and rows[0]["type"] == "comparison"
    env = SearchQAEnv(corpus_path=corpus, questions_path=questions)
    space = env.task_space
    (task,) = space.split("train") + space.split("heldout")
    assert space.category(task) == "comparison/2hop" and validate(space, task)
    src.write_text('{"not": "a list"}')
    with pytest.raises(ConfigError, match="JSON list"):
        convert_hotpotqa(src, tmp_path / "out2")
