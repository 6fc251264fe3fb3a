"""Where an episode's documents and question come from: the generated world, or user files.

A `QASource` holds a corpus (documents, lookup by id and title, a lazily built BM25 index)
and turns TaskSpec params into a `Question`. Two kinds of params exist:

* structural world questions ({"world_seed", "kind", "start", ...}, see questions.py);
* inline questions, which work with any corpus:
  {"question": str, "answers": [str, ...], "supporting": [doc id, ...], "kind"?: str, "question_id"?: str}.

User question files are JSONL, one question per line:
  {"id": str, "question": str, "answer": str | [str, ...], "supporting": [doc id, ...]?,
   "type"?: str, "split"?: "train" | "heldout" | "heldout_unseen"}
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from agentgym.envs.search.corpus import Document, load_corpus_jsonl, render_corpus
from agentgym.envs.search.index import SearchIndex, corpus_key
from agentgym.envs.search.questions import Question, resolve
from agentgym.envs.search.world import World, generate_world
from agentgym.errors import AgentGymError, ConfigError
from agentgym.safe_files import read_jsonl


class InvalidQuestionError(AgentGymError, ValueError):
    """TaskSpec params that describe no answerable question."""


class QASource:
    def __init__(self, docs: list[Document], name: str):
        self.docs = docs
        self.name = name
        self.row_of = {d.id: i for i, d in enumerate(docs)}
        self.row_of_folded = {}
        for i, d in enumerate(docs):  # case-insensitive ids and titles; the first document wins
            self.row_of_folded.setdefault(_fold(d.id), i)
        for i, d in enumerate(docs):
            self.row_of_folded.setdefault(_fold(d.title), i)
        self._index: SearchIndex | None = None
        self._key: str | None = None

    @property
    def index(self) -> SearchIndex:
        if self._index is None:
            self._index = SearchIndex.cached(self.docs, key=self.key)
        return self._index

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = corpus_key(self.docs)
        return self._key

    def lookup(self, ref: str) -> Document | None:
        """The document named by an id or a title (exact first, then case- and space-insensitive)."""
        row = self.row_of.get(ref)
        if row is None:
            row = self.row_of_folded.get(_fold(ref))
        return None if row is None else self.docs[row]

    def question(self, params: dict) -> Question:
        if "question" in params:
            return self._inline(params)
        return self._structural(params)

    def _structural(self, params: dict) -> Question:
        raise InvalidQuestionError(f"{self.name} has no generated world: give the question inline "
                                   '({"question": ..., "answers": [...], "supporting": [...]})')

    def _inline(self, params: dict) -> Question:
        text, answers = params.get("question"), params.get("answers", params.get("answer"))
        if isinstance(answers, str):
            answers = [answers]
        supporting = params.get("supporting", [])
        if not isinstance(text, str) or not text.strip():
            raise InvalidQuestionError("an inline question needs a non-empty 'question' string")
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
            raise InvalidQuestionError("an inline question needs 'answers': a list of non-empty strings")
        if not isinstance(supporting, list) or not all(isinstance(s, str) for s in supporting):
            raise InvalidQuestionError("'supporting' must be a list of document ids")
        docs = []
        for ref in supporting:
            doc = self.lookup(ref)
            if doc is None:
                raise InvalidQuestionError(f"supporting document {ref!r} is not in the corpus {self.name}")
            if doc.id not in docs:
                docs.append(doc.id)
        kind = str(params.get("kind") or "qa")
        return Question(text.strip(), tuple(answers), tuple(docs),
                        tuple(self.docs[self.row_of[d]].title for d in docs), kind, len(docs))


class WorldSource(QASource):
    def __init__(self, world: World):
        super().__init__(render_corpus(world), f"generated world {world.seed}")
        self.world = world

    def _structural(self, params: dict) -> Question:
        try:
            return resolve(self.world, params)
        except ValueError as exc:
            raise InvalidQuestionError(f"not a valid question of world {self.world.seed}: {exc}") from None


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


@lru_cache(maxsize=4)
def world_source(world_seed: int = 0) -> WorldSource:
    return WorldSource(generate_world(world_seed))


def file_source(corpus_path: str | Path) -> QASource:
    path = Path(corpus_path).expanduser().resolve()
    stat = path.stat() if path.is_file() else None
    return _file_source(str(path), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)


@lru_cache(maxsize=4)
def _file_source(path: str, mtime_ns: int, size: int) -> QASource:
    return QASource(load_corpus_jsonl(path), path)


QUESTION_LINE = '{"id": ..., "question": ..., "answer": ..., "supporting": [...]}'


def load_questions_jsonl(path: str | Path) -> list[dict]:
    """Question records of a user file, checked line by line (a bad line is a ConfigError)."""
    out, seen = [], set()
    for lineno, (qid, text, answer, obj) in read_jsonl(path, "question", QUESTION_LINE, lambda obj: (
            str(obj["id"]), obj["question"], obj["answer"], obj), ConfigError):
        answers = [answer] if isinstance(answer, str) else answer
        if not isinstance(text, str) or not isinstance(answers, list) or not answers:
            raise ConfigError(f"{path}:{lineno}: 'question' must be a string and 'answer' a string or a list")
        split = obj.get("split", "")
        if split not in ("", "train", "heldout", "heldout_unseen"):
            raise ConfigError(f"{path}:{lineno}: split must be train, heldout or heldout_unseen, got {split!r}")
        if qid in seen:
            raise ConfigError(f"{path}:{lineno}: duplicate question id {qid!r}")
        seen.add(qid)
        out.append({"id": qid, "question": text, "answers": [str(a) for a in answers],
                    "supporting": [str(s) for s in obj.get("supporting", [])],
                    "type": str(obj.get("type") or "qa"), "split": split})
    if not out:
        raise ConfigError(f"questions file {path} holds no questions")
    return out
