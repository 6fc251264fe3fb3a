"""Task spaces of SearchQA: questions over the generated world, or over a user's question file.

Run `python -m agentgym.envs.search.task_space` to regenerate the shipped split manifests.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.search.dataset import QASource, load_questions_jsonl, world_source
from agentgym.envs.search.questions import CATEGORIES, Question, QuestionSampler, is_seen, is_unseen
from agentgym.envs.search.world import RELATIONS, SEEN_RELATIONS, ATTRIBUTES
from agentgym.tasks.space import TaskSpace, check_schema
from agentgym.tasks.generation import parse_json
from agentgym.tasks.validation import registered_env
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split

ENV_ID = "agentgym/SearchQA-v0"
SPLIT_SIZES = {"train": 1000, "heldout": 200, "heldout_unseen": 200}


def oracle_plan(question: Question) -> list[str]:
    """Search for each supporting document by its title, open it, then answer."""
    plan: list[str] = []
    for query, doc_id in zip(question.queries, question.supporting):
        plan += [f"search[{query}]", f"open[{doc_id}]"]
    return plan + [f"answer[{question.answers[0]}]"]


class SearchTaskSpace(TaskSpace):
    """Questions about a fictional encyclopedia (people, cities, companies, works), answered by
    searching it. A task's params are a structural question spec:
    {"world_seed": 0, "kind": "single"|"bridge"|"composition", "start": "<entity id>",
     "path": [relation, ...], "attribute": "<attribute>"|"name"} or
    {"world_seed": 0, "kind": "comparison", "branches": [{"start": id, "path": [rel]}, {...}],
     "attribute": "<attribute>", "form": "min"|"max"|"same"}.
    Entity ids look like per-00012, cit-00003, com-00100, wrk-00042; relations: born_in,
    works_for, spouse, mayor, headquartered_in, founder, ceo, creator, publisher (plus mentor,
    sister_city, parent_company, set_in, kept for held-out-unseen tasks)."""

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"

    def describe(self) -> str:
        return inspect.cleandoc(type(self).__doc__ or "")

    def parse(self, text: str) -> TaskSpec | None:
        """A JSON question spec from an LLM's proposal; world_seed defaults to 0, so that a
        proposal that leaves it out gets the same id as the same question from `sample`."""
        spec = parse_json(self, text)
        if spec is None or "question" in spec.params:
            return spec
        return TaskSpec(spec.env_id, {"world_seed": 0, **spec.params}, seed=spec.seed)

    def check_params(self, params: dict) -> dict:
        return check_schema(params, {}, {"world_seed": int, "kind": str, "start": str, "path": list, "attribute": str,
                                         "branches": list, "form": str, "question": str, "answer": str,
                                         "answers": list, "supporting": list}, what="SearchQA")

    def reserved(self, spec: TaskSpec) -> bool:
        """Structural questions touching the unseen entities or relations are kept for
        heldout_unseen."""
        params = dict(spec.params)
        if "question" in params:
            return False
        return not is_seen(world_source(int(params.get("world_seed", 0))).world, params)

    def source(self, spec: TaskSpec):
        return world_source(int(spec.params.get("world_seed", 0)))

    def question(self, spec: TaskSpec) -> Question:
        return self.source(spec).question(dict(spec.params))

    def _sampler(self, world_seed: int) -> QuestionSampler:
        cache = self.__dict__.setdefault("_samplers", {})
        if world_seed not in cache:
            cache[world_seed] = QuestionSampler(world_source(world_seed).world)
        return cache[world_seed]

    def sample(self, rng: np.random.Generator, kind: str | None = None, hops: int | None = None,
               unseen: bool = False, world_seed: int = 0, **_: Any) -> TaskSpec:
        """A question of the given kind and hop count (random where None). By default only
        entities and relations that training may see are used; unseen=True draws from the
        held-out-unseen part of the world."""
        params = self._sampler(world_seed).sample(rng, kind=kind, hops=hops, unseen=unseen)
        return TaskSpec(self.env_id, {"world_seed": world_seed, **params}, seed=0)

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """A nearby question: another start entity, attribute or comparison form, or one relation
        more or fewer. The variant stays in the seen (or unseen) part of the world of `spec`."""
        params = dict(spec.params)
        if "question" in params:
            raise ValueError("inline questions cannot be mutated")
        seed = int(params.get("world_seed", 0))
        world = world_source(seed).world
        unseen = is_unseen(world, params)
        sampler = self._sampler(seed)
        for _ in range(200):
            candidate = _mutated(params, rng, world, sampler, unseen)
            if candidate is None or candidate == params:
                continue
            try:
                ok = is_unseen(world, candidate) if unseen else is_seen(world, candidate)
            except ValueError:
                continue
            if ok:
                return TaskSpec(spec.env_id, candidate, seed=spec.seed)
        q = self.question(spec)  # no local variant found: a fresh question of the same category
        return self.sample(rng, kind=q.kind, hops=q.hops, unseen=unseen, world_seed=seed)

    def solve(self, spec: TaskSpec) -> list[str]:
        return oracle_plan(self.question(spec))

    def category(self, spec: TaskSpec) -> str:
        return self.question(spec).category

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        """Category-balanced splits; heldout never repeats a train task, heldout_unseen uses only
        entities of the unseen countries and at least one relation type training never asks about."""
        out: dict[str, list[TaskSpec]] = {}
        taken: set[str] = set()
        for offset, (name, size) in enumerate(SPLIT_SIZES.items()):
            rng = np.random.default_rng([2026, offset])
            unseen = name == "heldout_unseen"
            cats = [c for c in CATEGORIES if not (unseen and c == ("comparison", 2))]
            tasks: list[TaskSpec] = []
            while len(tasks) < size:
                kind, hops = cats[len(tasks) % len(cats)]
                spec = self.sample(rng, kind=kind, hops=hops, unseen=unseen)
                if spec.task_id not in taken:
                    taken.add(spec.task_id)
                    tasks.append(spec)
            out[name] = tasks
        return out


def _mutated(params: dict, rng, world, sampler: QuestionSampler, unseen: bool) -> dict | None:
    params = {k: (list(v) if isinstance(v, list) else v) for k, v in params.items()}
    allowed = sorted(RELATIONS) if unseen else sorted(SEEN_RELATIONS)
    choice = int(rng.integers(3))
    if params["kind"] == "comparison":
        branches = [dict(b, path=list(b.get("path", []))) for b in params["branches"]]
        if choice == 0 and params["form"] in ("min", "max"):
            params["form"] = "max" if params["form"] == "min" else "min"
        elif choice == 1:  # a different entity at the start of one branch
            i = int(rng.integers(2))
            pool = sampler.pool[(unseen, world.get(branches[i]["start"]).type)]
            branches[i]["start"] = pool[int(rng.integers(len(pool)))]
        else:
            i = int(rng.integers(2))
            branches[i]["start"], branches[1 - i]["start"] = branches[1 - i]["start"], branches[i]["start"]
            branches[i]["path"], branches[1 - i]["path"] = branches[1 - i]["path"], branches[i]["path"]
        params["branches"] = branches
        return params
    path = params["path"]
    if choice == 0:  # another start entity of the same type
        pool = sampler.pool[(unseen, world.get(params["start"]).type)]
        params["start"] = pool[int(rng.integers(len(pool)))]
    elif choice == 1 and params["attribute"] != "name":  # ask for another attribute
        end = world.get(_end(world, params["start"], path))
        attrs = sorted(ATTRIBUTES[end.type])
        params["attribute"] = attrs[int(rng.integers(len(attrs)))]
    elif choice == 2 and (len(path) < 3 or (params["attribute"] == "name" and len(path) < 4)):  # one further
        end = world.get(_end(world, params["start"], path))
        options = [r for r in allowed if r in end.rels]
        if not options:
            return None
        path.append(options[int(rng.integers(len(options)))])
        if params["attribute"] != "name":
            attrs = sorted(ATTRIBUTES[world.get(end.rels[path[-1]]).type])
            params["attribute"] = attrs[int(rng.integers(len(attrs)))]
    elif path:  # one relation fewer
        path.pop()
        if params["attribute"] != "name":
            attrs = sorted(ATTRIBUTES[world.get(_end(world, params["start"], path)).type])
            params["attribute"] = attrs[int(rng.integers(len(attrs)))]
    else:
        return None
    n, name = len(path), params["attribute"] == "name"
    params["kind"] = "single" if (n == 0 or (n == 1 and name)) else ("composition" if name else "bridge")
    params["path"] = path
    return params


def _end(world, start: str, path: list[str]) -> str:
    current = start
    for rel in path:
        current = world.get(current).rels[rel]
    return current


class FileTaskSpace(TaskSpace):
    """Questions from a user's JSONL file over a user's corpus (e.g. HotpotQA converted with
    `agentgym.envs.search.hotpotqa`). Params are inline questions:
    {"question_id": str, "question": str, "answers": [str, ...], "supporting": [doc id, ...], "kind": str}.
    Splits come from each question's "split" field, else 10% of ids (by hash) are held out."""

    split_dir = None

    def __init__(self, source: QASource, questions_path: str | Path, env_kwargs: dict, env_id: str = ENV_ID):
        self.env_id = env_id
        self.source_ = source
        self.env_kwargs = env_kwargs
        self.records = load_questions_jsonl(questions_path)
        groups: dict[str, list[TaskSpec]] = {n: [] for n in self.split_names}
        for rec in self.records:
            split = rec["split"] or ("heldout" if _hash_fraction(rec["id"]) < 0.1 else "train")
            groups[split].append(self._spec(rec))
        self._groups = groups

    def _spec(self, rec: dict) -> TaskSpec:
        return TaskSpec(self.env_id, {"question_id": rec["id"], "question": rec["question"], "answers": rec["answers"],
                                      "supporting": rec["supporting"], "kind": rec["type"]}, seed=0)

    def read_split(self, name: str) -> tuple[TaskSpec, ...]:
        if name not in self.split_names:
            return super().read_split(name)  # raises the usual SplitFileError
        # Specs carry env_id, which a registered id may change after construction.
        return tuple(TaskSpec(self.env_id, t.params, t.seed) for t in self._groups[name])

    def make_env(self, **kwargs):
        return registered_env(self.env_id, **{**self.env_kwargs, **kwargs})

    def question(self, spec: TaskSpec) -> Question:
        return self.source_.question(dict(spec.params))

    def sample(self, rng: np.random.Generator, kind: str | None = None, hops: int | None = None, **_: Any) -> TaskSpec:
        pool = [t for t in self.read_split("train") if (kind is None or t.params.get("kind") == kind)
                and (hops is None or len(t.params["supporting"]) == hops)]
        if not pool:
            raise ValueError(f"no train question with kind={kind!r} and hops={hops!r}")
        return pool[int(rng.integers(len(pool)))]

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """Fixed data has no neighbours to edit: another train question of the same category."""
        return self.sample(rng, kind=spec.params.get("kind"), hops=len(spec.params.get("supporting", [])))

    def solve(self, spec: TaskSpec) -> list[str]:
        return oracle_plan(self.question(spec))

    def category(self, spec: TaskSpec) -> str:
        return self.question(spec).category

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        return {name: list(self.read_split(name)) for name in self.split_names}


def _hash_fraction(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0x100000000


def write_splits() -> None:
    space = SearchTaskSpace()
    for name, tasks in space.build_splits().items():
        save_split(space.split_dir / f"{name}.jsonl", tasks)
        print(f"{name}: {len(tasks)} tasks")


if __name__ == "__main__":
    write_splits()
