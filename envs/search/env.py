"""SearchQA: answer a question by searching an encyclopedia (Search-R1 / ASearcher style).

Actions: `search[query]` (top-k documents by BM25, each with id, title and its sentence that
best matches the query), `open[doc id or exact title]` (the full document) and `answer[text]`
(ends the episode). The reward is sparse: token F1 of the answer against the gold answers at
the answering step (`score`), and `success` is exact match after normalization.

By default the corpus is the generated fictional world (>= 20,000 documents) and tasks come
from the shipped splits. `SearchQAEnv(corpus_path=..., questions_path=...)` plays a user's
JSONL corpus and questions instead (formats in corpus.py and dataset.py).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from agentgym.core import TextEnv
from agentgym.envs.search.answers import grade
from agentgym.envs.search.dataset import InvalidQuestionError, QASource, file_source, world_source
from agentgym.envs.search.index import tokenize
from agentgym.envs.search.questions import Question
from agentgym.envs.search.task_space import FileTaskSpace, SearchTaskSpace
from agentgym.errors import ConfigError
from agentgym.snapshot import need, need_bool, need_keys, need_score, need_str, need_str_list
from agentgym.tasks.spec import TaskSpec

_ACTION = re.compile(r"^\s*(search|open|answer)\s*\[(.*)\]\s*$", re.S | re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_ECHO_CHARS = 120  # how much of a long query or document reference the observation repeats
_ACTION_HELP = "Use search[query], open[doc id] or answer[text]."


class _TaskSpaceSlot:
    """`SearchQAEnv.task_space`: the generated world's space on the class, a user file's space on
    an instance that plays one (named after the id it was registered under)."""

    def __init__(self):
        self.world_space = SearchTaskSpace()

    def __get__(self, env, owner=None):
        if env is None or env._file_space is None:
            return self.world_space
        space = env._file_space
        if getattr(env, "spec", None) is not None and env.spec.id != space.env_id:
            space.env_id = env.spec.id
            space.__dict__.pop("_index", None)
        return space


class SearchQAEnv(TextEnv):
    task_space = _TaskSpaceSlot()
    snapshot_version = 1
    rules = (
        "Answer the question by searching an encyclopedia of a fictional world: no fact can be known in "
        "advance, every fact must be read from the documents.\n"
        "Actions (one per turn):\n"
        "  search[query]  - the top documents for the query: id, title and the best matching sentence\n"
        "  open[doc id]   - the full text of a document (an id from the results, or an exact title)\n"
        "  answer[text]   - your final answer; it ends the episode\n"
        "Answers are short: a name, a title, a number, a year, or yes/no."
    )

    def __init__(self, corpus_path: str | Path | None = None, questions_path: str | Path | None = None,
                 top_k: int = 5, snippet_chars: int = 240, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if questions_path is not None and corpus_path is None:
            raise ConfigError("questions_path needs corpus_path: pass the JSONL corpus the questions are about")
        if not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"top_k must be a positive integer, got {top_k!r}")
        self.top_k = top_k
        self.snippet_chars = int(snippet_chars)
        self._file: QASource | None = file_source(corpus_path) if corpus_path is not None else None
        self._file_space = None
        if questions_path is not None:
            kwargs = {"corpus_path": corpus_path, "questions_path": questions_path, "top_k": top_k,
                      "snippet_chars": snippet_chars}
            self._file_space = FileTaskSpace(self._file, questions_path, kwargs)
        self._source: QASource | None = None
        self._question: Question | None = None
        self._opened: list[str] = []
        self._view: tuple = ("start",)
        self._done = False

    # --- episode ----------------------------------------------------------------------------
    def _source_for(self, task: TaskSpec) -> QASource:
        if self._file is not None:
            return self._file
        return world_source(int(task.params.get("world_seed", 0)))

    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        try:
            self._source = self._source_for(task)
            self._question = self._source.question(dict(task.params))
        except (InvalidQuestionError, TypeError, ValueError) as exc:
            raise InvalidQuestionError(f"task {task.task_id} cannot be played: {exc}") from None
        self._opened, self._view, self._done = [], ("start",), False
        self._success, self._score = False, 0.0
        _ = self._source.index  # build (or load) the index now, not inside the first step
        obs = f"Question: {self._question.text}\n{_ACTION_HELP}"
        return obs, self._info(valid=True, success=False, score=0.0)

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The question has been answered; reset to play again.", 0.0, True, False, \
                self._info(valid=False, success=self._success, score=self._score)
        match = _ACTION.match(action)
        if match is None:
            shown = _echo(action)
            return f"Unknown action {shown!r}. {_ACTION_HELP}", 0.0, False, False, self._info(False)
        verb, arg = match.group(1).lower(), match.group(2).strip()
        if verb == "search":
            return self._search(arg)
        if verb == "open":
            return self._open(arg)
        return self._answer(arg)

    def _search(self, query: str):
        if not query:
            return f"search[] needs a query, e.g. search[{self._example()}].", 0.0, False, False, self._info(False)
        hits = self._source.index.search(query, self.top_k)
        if not hits:
            self._view = ("search", ())
            return (f"No documents match {_echo(query)!r}. Try other words, e.g. names from the question.",
                    0.0, False, False, self._info(True))
        terms = set(tokenize(query[:2000]))
        lines = [f"Search results for {_echo(query)!r}:"]
        for rank, (row, _score) in enumerate(hits, 1):
            doc = self._source.docs[row]
            lines.append(f"{rank}. [{doc.id}] {doc.title}: {self._snippet(doc.text, terms)}")
        self._view = ("search", tuple(self._source.docs[row].id for row, _ in hits))
        return "\n".join(lines), 0.0, False, False, self._info(True)

    def _open(self, ref: str):
        doc = self._source.lookup(ref) if ref else None
        if doc is None:
            hint = "open[] needs a document id" if not ref else f"No document {_echo(ref)!r}"
            return f"{hint}: use an id shown by search[...], e.g. open[{self._source.docs[0].id}].", \
                0.0, False, False, self._info(False)
        if doc.id not in self._opened:
            self._opened.append(doc.id)
        self._view = ("open", doc.id)
        return f"[{doc.id}] {doc.title}\n{doc.text}", 0.0, False, False, self._info(True)

    def _answer(self, text: str):
        if not text:
            return "answer[] needs your answer inside the brackets.", 0.0, False, False, self._info(False)
        success, score = grade(text, list(self._question.answers))
        self._done, self._success, self._score = True, success, score
        self._view = ("answer", text[:_ECHO_CHARS])
        verdict = "Correct." if success else f"Incorrect (token F1 {score:.2f})."
        return f"You answered {_echo(text)!r}. {verdict}", score, True, False, \
            self._info(True, success=success, score=score)

    # --- snapshots: the documents opened, what the agent looks at, the answer ----------------
    def _get_state(self) -> dict:
        return {"opened": list(self._opened), "view": [self._view[0], *(list(v) if isinstance(v, tuple) else v
                                                                         for v in self._view[1:])],
                "done": self._done, "success": self._success, "score": self._score}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("opened", "view", "done", "success", "score"))
        opened = need_str_list(state["opened"], "opened")
        need(len(set(opened)) == len(opened), "a document is listed twice in opened")
        for doc_id in opened:
            doc = self._source.lookup(doc_id)
            need(doc is not None and doc.id == doc_id, f"no document {doc_id[:60]!r} in the corpus")
        view = state["view"]
        need(isinstance(view, list) and view and view[0] in ("start", "search", "open", "answer"),
             "view must be [start], [search, ids], [open, id] or [answer, text]")
        kind = view[0]
        if kind == "start":
            need(len(view) == 1, "the start view has nothing more")
            view = ("start",)
        elif kind == "search":
            need(len(view) == 2, "a search view lists the result ids")
            ids = need_str_list(view[1], "the search results")
            need(len(ids) <= self.top_k, f"a search shows at most {self.top_k} results")
            need(all(self._source.lookup(i) is not None for i in ids), "a search result is not in the corpus")
            view = ("search", tuple(ids))
        else:
            need(len(view) == 2, f"an {kind} view names one document or answer")
            ref = need_str(view[1], f"the {kind} view")
            need(kind == "answer" or ref in opened, "the open view shows a document that was not opened")
            view = (kind, ref)
        done, success = need_bool(state["done"], "done"), need_bool(state["success"], "success")
        score = need_score(state["score"], "score")
        need(done == (kind == "answer"), "done must be true exactly once the question is answered")
        need(done or (not success and score == 0.0), "success and score come only with an answer")
        self._opened, self._view = opened, view
        self._done, self._success, self._score = done, success, score

    # --- helpers ----------------------------------------------------------------------------
    def _snippet(self, text: str, terms: set[str]) -> str:
        sentences = _SENTENCE.split(text)
        best = max(range(len(sentences)), key=lambda i: (len(terms & set(tokenize(sentences[i]))), -i))
        snippet = sentences[best]
        if len(snippet) > self.snippet_chars:
            snippet = snippet[: self.snippet_chars].rsplit(" ", 1)[0] + " ..."
        return snippet

    def _example(self) -> str:
        return self._question.queries[0] if self._question and self._question.queries else "a name"

    def _info(self, valid: bool, success: bool = False, score: float = 0.0) -> dict:
        q = self._question
        support = set(q.supporting)
        progress = len(support.intersection(self._opened)) / len(support) if support else 0.0
        state = repr((self.task.task_id, sorted(self._opened), self._view, self._done))
        return {
            "task_id": self.task.task_id,
            "instruction": q.text,
            "anchor": hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()[:16],
            "admissible_actions": None,
            "action_valid": bool(valid),
            "success": bool(success),
            "score": float(score),
            "progress": float(progress if not success else 1.0),
            "opened_docs": list(self._opened),
        }


def _echo(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ECHO_CHARS else text[:_ECHO_CHARS] + "..."
