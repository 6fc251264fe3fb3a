"""Questions over the generated world: 1 to 4 hops, with exact answers and supporting documents.

A question is stored as a small structural spec (TaskSpec params) and rendered into words
here, so the same spec always gives the same question, answer and supporting documents:

* chain questions {"kind", "start", "path": [relation, ...], "attribute"}: follow the relations
  from the start entity and ask for an attribute of where they end ("name" asks who/what it is).
  - single       1 hop:  an attribute of the start, or one relation's target
  - bridge       2-4:    1-3 relations, then an attribute of the bridge entity reached
  - composition  2-4:    2-4 relations composed; the answer is the entity reached
* comparison {"kind": "comparison", "branches": [{"start", "path"}, {"start", "path"}],
  "attribute", "form": "min" | "max" | "same"}: two chains of at most one relation each, compared
  on an attribute (which is earlier/larger: answer the name; "same": answer yes or no). 2-4 hops.

Hops count the documents an agent must read: each relation is stated in its source's article
and each attribute in its owner's article.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.search.answers import normalize_answer
from agentgym.envs.search.world import ATTRIBUTES, RELATIONS, SEEN_RELATIONS, UNSEEN_RELATIONS, World

KINDS = ("single", "bridge", "composition", "comparison")
CATEGORIES = (("single", 1), ("bridge", 2), ("bridge", 3), ("bridge", 4), ("composition", 2),
              ("composition", 3), ("composition", 4), ("comparison", 2), ("comparison", 3), ("comparison", 4))


@dataclass(frozen=True)
class Question:
    text: str
    answers: tuple[str, ...]
    supporting: tuple[str, ...]  # document ids, in the order an agent needs them
    queries: tuple[str, ...]  # a search query that finds each supporting document (oracle)
    kind: str
    hops: int
    relations: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()

    @property
    def category(self) -> str:
        return f"{self.kind}/{self.hops}hop"


_REL_PHRASE = {
    "born_in": "the city where {x} was born",
    "works_for": "the company that employs {x}",
    "spouse": "the spouse of {x}",
    "mentor": "the mentor of {x}",
    "mayor": "the mayor of {x}",
    "sister_city": "the sister city of {x}",
    "headquartered_in": "the city where {x} is headquartered",
    "founder": "the founder of {x}",
    "ceo": "the chief executive of {x}",
    "parent_company": "the parent company of {x}",
    "publisher": "the company that released {x}",
    "set_in": "the city in which {x} is set",
}
_CREATOR_PHRASE = {"novel": "the author of {x}", "film": "the director of {x}", "album": "the composer of {x}",
                   "painting": "the painter of {x}"}
_ATTRIBUTE_QUESTION = {
    "birth_year": "In what year was {x} born?",
    "occupation": "What is the occupation of {x}?",
    "country": "In which country is {x}?",
    "population": "What is the population of {x}?",
    "founded_year": "In what year was {x} founded?",
    "industry": "In which industry does {x} operate?",
    "employees": "How many people does {x} employ?",
    "year": "In what year was {x} first released?",
    "genre": "What is the genre of {x}?",
}
_NAME_QUESTION = {"person": "Who is {x}?", "city": "What is the name of {x}?",
                  "company": "What is the name of {x}?", "work": "What is the title of {x}?"}
_COMPARE_QUESTION = {
    ("birth_year", "min"): "Who was born earlier, {a} or {b}?",
    ("birth_year", "max"): "Who was born later, {a} or {b}?",
    ("founded_year", "min"): "Which was founded earlier, {a} or {b}?",
    ("founded_year", "max"): "Which was founded later, {a} or {b}?",
    ("population", "min"): "Which city has the smaller population, {a} or {b}?",
    ("population", "max"): "Which city has the larger population, {a} or {b}?",
    ("employees", "min"): "Which company has fewer employees, {a} or {b}?",
    ("employees", "max"): "Which company has more employees, {a} or {b}?",
    ("year", "min"): "Which was released earlier, {a} or {b}?",
    ("year", "max"): "Which was released later, {a} or {b}?",
}
_SAME_QUESTION = {
    "country": "Are {a} and {b} in the same country?",
    "occupation": "Do {a} and {b} have the same occupation?",
    "industry": "Do {a} and {b} operate in the same industry?",
    "genre": "Are {a} and {b} of the same genre?",
    "birth_year": "Were {a} and {b} born in the same year?",
    "founded_year": "Were {a} and {b} founded in the same year?",
    "year": "Were {a} and {b} released in the same year?",
}


def _walk(world: World, start: Any, path: Any) -> list[str]:
    """Entity ids visited from `start` along `path`; ValueError where the chain breaks."""
    if not isinstance(start, str) or start not in world.entities:
        raise ValueError(f"unknown start entity {start!r}")
    if not isinstance(path, list) or not all(isinstance(r, str) for r in path):
        raise ValueError("path must be a list of relation names")
    chain = [start]
    for rel in path:
        if rel not in RELATIONS:
            raise ValueError(f"unknown relation {rel!r}")
        current = world.get(chain[-1])
        if RELATIONS[rel][0] != current.type:
            raise ValueError(f"relation {rel} does not apply to a {current.type}")
        target = current.rels.get(rel)
        if target is None:
            raise ValueError(f"{current.id} has no {rel}")
        if target in chain:
            raise ValueError("the chain visits an entity twice")
        chain.append(target)
    return chain


def _reference(world: World, chain: list[str], path: list[str]) -> str:
    text = world.get(chain[0]).title
    for source, rel in zip(chain, path):
        phrase = _CREATOR_PHRASE[world.get(source).attrs["kind"]] if rel == "creator" else _REL_PHRASE[rel]
        text = phrase.format(x=text)
    return text


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _with_title(name: str, entity) -> tuple[str, ...]:
    """The name, and the document title too where it differs ("Mira Castell (architect)")."""
    return (name,) if entity.title == name else (name, entity.title)


def _leaks(answer: str, question: str) -> bool:
    a, q = normalize_answer(answer), normalize_answer(question)
    return bool(a) and f" {a} " in f" {q} "


def resolve(world: World, params: dict) -> Question:
    """The question a structural spec describes; ValueError if the spec is not a valid question."""
    kind = params.get("kind")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "comparison":
        return _resolve_comparison(world, params)
    path = params.get("path", [])
    chain = _walk(world, params.get("start"), path)
    end = world.get(chain[-1])
    attribute = params.get("attribute")
    if attribute != "name" and attribute not in ATTRIBUTES[end.type]:
        raise ValueError(f"a {end.type} has no attribute {attribute!r}")
    n = len(path)
    ok = {"single": (n == 0 and attribute != "name") or (n == 1 and attribute == "name"),
          "bridge": 1 <= n <= 3 and attribute != "name",
          "composition": 2 <= n <= 4 and attribute == "name"}[kind]
    if not ok:
        raise ValueError(f"a {kind} question cannot have {n} relations and attribute {attribute!r}")
    ref = _reference(world, chain, path)
    text = _capitalize((_NAME_QUESTION[end.type] if attribute == "name" else _ATTRIBUTE_QUESTION[attribute])
                       .format(x=ref))
    answer = end.display(attribute)
    if _leaks(answer, text):
        raise ValueError("the question gives its answer away")
    docs = chain if attribute != "name" else chain[:-1]
    answers = _with_title(answer, end) if attribute == "name" else (answer,)
    return Question(text, answers, tuple(docs), tuple(world.get(d).title for d in docs), kind, len(docs),
                    tuple(path), tuple(chain))


def _resolve_comparison(world: World, params: dict) -> Question:
    branches = params.get("branches")
    if not isinstance(branches, list) or len(branches) != 2 or not all(isinstance(b, dict) for b in branches):
        raise ValueError("a comparison needs two branches {start, path}")
    chains, paths = [], []
    for b in branches:
        path = b.get("path", [])
        if not isinstance(path, list) or len(path) > 1:
            raise ValueError("a comparison branch has at most one relation")
        chains.append(_walk(world, b.get("start"), path))
        paths.append(path)
    ends = [world.get(c[-1]) for c in chains]
    if ends[0].type != ends[1].type or ends[0].id == ends[1].id or chains[0][0] == chains[1][0]:
        raise ValueError("a comparison needs two different entities of one type")
    attribute, form = params.get("attribute"), params.get("form")
    if attribute not in ATTRIBUTES[ends[0].type]:
        raise ValueError(f"a {ends[0].type} has no attribute {attribute!r}")
    refs = [_reference(world, c, p) for c, p in zip(chains, paths)]
    values = [e.attrs[attribute] for e in ends]
    if form in ("min", "max"):
        if (attribute, form) not in _COMPARE_QUESTION:
            raise ValueError(f"{attribute!r} cannot be compared by {form}")
        if values[0] == values[1] or ends[0].name == ends[1].name:
            raise ValueError("the comparison has no unique answer")
        text = _COMPARE_QUESTION[(attribute, form)].format(a=refs[0], b=refs[1])
        pick = min if form == "min" else max
        winner = ends[values.index(pick(values))]
        answers = _with_title(winner.name, winner)
    elif form == "same":
        if attribute not in _SAME_QUESTION:
            raise ValueError(f"{attribute!r} cannot be compared for equality")
        text = _SAME_QUESTION[attribute].format(a=refs[0], b=refs[1])
        if any(_leaks(e.display(attribute), text) for e in ends):
            raise ValueError("the question gives its answer away")
        answers = ("yes" if values[0] == values[1] else "no",)
    else:
        raise ValueError(f"form must be min, max or same, got {form!r}")
    docs = chains[0] + chains[1]
    return Question(_capitalize(text), answers, tuple(docs), tuple(world.get(d).title for d in docs),
                    "comparison", len(docs), tuple(paths[0] + paths[1]), tuple(docs))


def is_unseen(world: World, params: dict) -> bool:
    """Whether a question belongs to the held-out-unseen world: unseen entities and relations."""
    q = resolve(world, params)
    return all(world.get(e).unseen for e in q.entities) and bool(set(q.relations) & UNSEEN_RELATIONS)


def is_seen(world: World, params: dict) -> bool:
    """Whether a question uses only entities and relation types that training may see."""
    q = resolve(world, params)
    return not any(world.get(e).unseen for e in q.entities) and set(q.relations) <= SEEN_RELATIONS


# --- sampling -----------------------------------------------------------------------------------
class QuestionSampler:
    """Draws valid question specs from a world, restricted to its seen or its unseen part."""

    def __init__(self, world: World):
        self.world = world
        self.pool = {(u, t): [e for e in ids if world.get(e).unseen == u]
                     for t, ids in world.by_type.items() for u in (False, True)}
        # (unseen, relation) -> entities that have it, for comparison branches ending in a type
        self.having = {}
        for ent in world.entities.values():
            for rel in ent.rels:
                self.having.setdefault((ent.unseen, rel), []).append(ent.id)

    def sample(self, rng: np.random.Generator, kind: str | None = None, hops: int | None = None,
               unseen: bool = False, attempts: int = 2000) -> dict:
        combos = [c for c in CATEGORIES if (kind is None or c[0] == kind) and (hops is None or c[1] == hops)]
        if unseen:  # a 2-hop comparison has no relation, so it cannot use an unseen relation type
            combos = [c for c in combos if c != ("comparison", 2)]
        if not combos:
            raise ValueError(f"no question category with kind={kind!r} and hops={hops!r}")
        kind, hops = combos[int(rng.integers(len(combos)))]
        for _ in range(attempts):
            params = self._draw(rng, kind, hops, unseen)
            if params is None:
                continue
            try:
                ok = is_unseen(self.world, params) if unseen else is_seen(self.world, params)
            except ValueError:
                continue
            if ok:
                return params
        raise RuntimeError(f"could not sample a {kind}/{hops}hop question")  # pragma: no cover

    def _relations(self, unseen: bool) -> list[str]:
        return sorted(RELATIONS) if unseen else sorted(SEEN_RELATIONS)

    def _random_chain(self, rng, length: int, unseen: bool) -> tuple[str, list[str]] | None:
        etype = ("person", "city", "company", "work")[int(rng.integers(4))]
        pool = self.pool[(unseen, etype)]
        start = pool[int(rng.integers(len(pool)))]
        chain, path = [start], []
        allowed = self._relations(unseen)
        for _ in range(length):
            ent = self.world.get(chain[-1])
            options = [r for r in allowed if r in ent.rels and ent.rels[r] not in chain]
            if not options:
                return None
            rel = options[int(rng.integers(len(options)))]
            path.append(rel)
            chain.append(ent.rels[rel])
        return start, path

    def _draw(self, rng, kind: str, hops: int, unseen: bool) -> dict | None:
        if kind == "comparison":
            return self._draw_comparison(rng, hops, unseen)
        if kind == "single":
            length, name = (1, True) if unseen or rng.random() < 0.4 else (0, False)
        elif kind == "bridge":
            length, name = hops - 1, False
        else:
            length, name = hops, True
        drawn = self._random_chain(rng, length, unseen)
        if drawn is None:
            return None
        start, path = drawn
        if name:
            attribute = "name"
        else:
            end = self.world.get(_walk(self.world, start, path)[-1])
            attrs = sorted(ATTRIBUTES[end.type])
            attribute = attrs[int(rng.integers(len(attrs)))]
        return {"kind": kind, "start": start, "path": path, "attribute": attribute}

    def _draw_comparison(self, rng, hops: int, unseen: bool) -> dict | None:
        lengths = {2: (0, 0), 3: (0, 1) if rng.random() < 0.5 else (1, 0), 4: (1, 1)}[hops]
        end_type = ("person", "city", "company", "work")[int(rng.integers(4))]
        attrs = sorted(ATTRIBUTES[end_type])
        attribute = attrs[int(rng.integers(len(attrs)))]
        numeric = ATTRIBUTES[end_type][attribute] == "numeric"
        forms = (["min", "max"] if (attribute, "min") in _COMPARE_QUESTION else []) + \
                (["same"] if attribute in _SAME_QUESTION else [])
        form = forms[int(rng.integers(len(forms)))] if numeric else "same"
        want_same = bool(rng.random() < 0.5)
        first = self._branch(rng, end_type, lengths[0], unseen)
        if first is None:
            return None
        # For "same" questions, look for a second branch with the wanted answer so yes and no are balanced.
        for _ in range(40 if form == "same" else 1):
            second = self._branch(rng, end_type, lengths[1], unseen)
            if second is None:
                return None
            if form != "same":
                break
            ends = [self.world.get(_walk(self.world, b["start"], b["path"])[-1]) for b in (first, second)]
            if (ends[0].attrs[attribute] == ends[1].attrs[attribute]) == want_same:
                break
        return {"kind": "comparison", "branches": [first, second], "attribute": attribute, "form": form}

    def _branch(self, rng, end_type: str, length: int, unseen: bool) -> dict | None:
        if length == 0:
            pool = self.pool[(unseen, end_type)]
            return {"start": pool[int(rng.integers(len(pool)))], "path": []}
        rels = [r for r in self._relations(unseen) if RELATIONS[r][1] == end_type]
        if not rels:
            return None
        rel = rels[int(rng.integers(len(rels)))]
        pool = self.having.get((unseen, rel), [])
        if not pool:
            return None
        return {"start": pool[int(rng.integers(len(pool)))], "path": [rel]}
