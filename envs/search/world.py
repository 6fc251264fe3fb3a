"""A fictional world of people, cities, companies and works, generated from a seed.

Every relation is functional (an entity has at most one target per relation), so every
question built from a chain of relations has exactly one answer. The world is split in two
regions: countries of the "unseen" region hold the entities that only held-out-unseen
questions ask about, and relations never cross regions, so a chain that starts in the seen
region stays there. Four relation types (UNSEEN_RELATIONS) are likewise kept out of training
questions, although the corpus states them for every entity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from agentgym.envs.search import names

ENTITY_TYPES = ("person", "city", "company", "work")
ID_PREFIX = {"person": "per", "city": "cit", "company": "com", "work": "wrk"}

# relation -> (source type, target type)
RELATIONS: dict[str, tuple[str, str]] = {
    "born_in": ("person", "city"),
    "works_for": ("person", "company"),
    "spouse": ("person", "person"),
    "mentor": ("person", "person"),
    "mayor": ("city", "person"),
    "sister_city": ("city", "city"),
    "headquartered_in": ("company", "city"),
    "founder": ("company", "person"),
    "ceo": ("company", "person"),
    "parent_company": ("company", "company"),
    "creator": ("work", "person"),
    "publisher": ("work", "company"),
    "set_in": ("work", "city"),
}
UNSEEN_RELATIONS = frozenset({"mentor", "sister_city", "parent_company", "set_in"})
SEEN_RELATIONS = frozenset(RELATIONS) - UNSEEN_RELATIONS

# attribute -> "numeric" | "categorical", per entity type ("name" is valid for every type)
ATTRIBUTES: dict[str, dict[str, str]] = {
    "person": {"birth_year": "numeric", "occupation": "categorical"},
    "city": {"country": "categorical", "population": "numeric", "founded_year": "numeric"},
    "company": {"industry": "categorical", "founded_year": "numeric", "employees": "numeric"},
    "work": {"year": "numeric", "genre": "categorical"},
}


@dataclass(frozen=True)
class WorldConfig:
    countries: int = 12
    unseen_countries: int = 3
    cities: int = 480
    people: int = 7000
    companies: int = 1500
    works: int = 6000
    characters: int = 3000  # fictional characters: distractor documents that reuse real names
    namesake_rate: float = 0.12  # share of people who reuse an existing person's name


@dataclass
class Entity:
    id: str
    type: str
    name: str
    unseen: bool
    attrs: dict[str, Any] = field(default_factory=dict)
    rels: dict[str, str] = field(default_factory=dict)
    title: str = ""  # unique document title: the name, plus a disambiguator where names repeat
    gender: str = ""

    def display(self, attribute: str) -> str:
        """The attribute as the corpus writes it (and as an exact answer expects it)."""
        if attribute == "name":
            return self.name
        value = self.attrs[attribute]
        if attribute in ("population", "employees"):
            return f"{value:,}"
        return str(value)


@dataclass
class Character:
    """A fictional character inside a work: shares a real person's name, not their facts."""
    id: str
    name: str
    work: str
    occupation: str
    birth_year: int
    city: str
    company: str
    title: str = ""


@dataclass
class World:
    seed: int
    countries: list[str]
    unseen_countries: frozenset[str]
    entities: dict[str, Entity]
    by_type: dict[str, list[str]]
    characters: list[Character]

    def get(self, entity_id: str) -> Entity:
        return self.entities[entity_id]

    def follow(self, entity_id: str, relation: str) -> str | None:
        return self.entities[entity_id].rels.get(relation)


@lru_cache(maxsize=4)
def generate_world(seed: int = 0, config: WorldConfig | None = None) -> World:
    """The world of `seed`; the same seed gives the same world on every machine."""
    return _Builder(seed, config or WorldConfig()).build()


class _Builder:
    def __init__(self, seed: int, cfg: WorldConfig):
        self.rng = np.random.default_rng([seed, 0x5EA2C4])
        self.seed = seed
        self.cfg = cfg
        self.entities: dict[str, Entity] = {}
        self.by_type: dict[str, list[str]] = {t: [] for t in ENTITY_TYPES}

    def _pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def _add(self, etype: str, name: str, unseen: bool, **attrs) -> Entity:
        eid = f"{ID_PREFIX[etype]}-{len(self.by_type[etype]):05d}"
        ent = Entity(eid, etype, name, unseen, attrs=dict(attrs))
        self.entities[eid] = ent
        self.by_type[etype].append(eid)
        return ent

    def build(self) -> World:
        rng, cfg = self.rng, self.cfg
        taken: set[str] = set()
        countries = names.unique_words(rng, cfg.countries, (2, 3), taken)
        unseen_countries = frozenset(countries[cfg.countries - cfg.unseen_countries:])
        self.place_words = names.unique_words(rng, cfg.cities, (2, 3), taken)
        self.surnames = names.unique_words(rng, 900, (2, 3), taken)
        self.first_names = names.unique_words(rng, 500, (1, 2), taken)

        self._cities(countries, unseen_countries)
        self._people()
        self._companies()
        self._person_links()
        self._city_links()
        self._works()
        characters = self._characters()
        self._titles(characters)
        return World(self.seed, countries, unseen_countries, self.entities, self.by_type, characters)

    # --- entities -----------------------------------------------------------------------------
    def _cities(self, countries, unseen_countries):
        rng = self.rng
        used: set[tuple[str, str]] = set()
        for i in range(self.cfg.cities):
            country = countries[i % len(countries)]
            name = self.place_words[i]
            if i > 20 and rng.random() < 0.06:  # a namesake town in another country
                other = self.entities[self._pick(self.by_type["city"])]
                if (other.name, country) not in used:
                    name = other.name
            used.add((name, country))
            self._add("city", name, country in unseen_countries, country=country,
                      population=int(round(float(rng.lognormal(11.5, 1.1)), -2)) + 1000,
                      founded_year=int(rng.integers(800, 1900)))
        self.region_cities = {u: [c for c in self.by_type["city"] if self.entities[c].unseen == u]
                              for u in (False, True)}

    def _people(self):
        rng, cfg = self.rng, self.cfg
        # Creators are over-represented so that every region has authors, directors, composers, painters.
        weights = np.array([3.0 if o in names.CREATOR_OCCUPATION.values() else 1.0 for o in names.OCCUPATIONS])
        weights /= weights.sum()
        keys: set[tuple[str, str, int]] = set()
        people: list[Entity] = []
        while len(people) < cfg.people:
            city = self.entities[self._pick(self.by_type["city"])]
            occupation = names.OCCUPATIONS[int(rng.choice(len(names.OCCUPATIONS), p=weights))]
            birth_year = int(rng.integers(1850, 1996))
            if people and rng.random() < cfg.namesake_rate:
                name = self._pick(people).name
            else:
                name = f"{self._pick(self.first_names)} {self._pick(self.surnames)}"
            if (name, occupation, birth_year) in keys:  # no title could tell these two apart
                continue
            keys.add((name, occupation, birth_year))
            p = self._add("person", name, city.unseen, birth_year=birth_year, occupation=occupation)
            p.gender = "f" if rng.random() < 0.5 else "m"
            p.rels["born_in"] = city.id
            people.append(p)
        self.region_people = {u: [p.id for p in people if p.unseen == u] for u in (False, True)}
        self.people_by_occupation = {
            (u, o): [p.id for p in people if p.unseen == u and p.attrs["occupation"] == o]
            for u in (False, True) for o in names.OCCUPATIONS
        }

    def _companies(self):
        rng = self.rng
        creative = list(names.PUBLISHER_INDUSTRY.values())
        # Each region gets publishers for every kind of work before the random remainder.
        plan = [(u, ind) for u in (False, True) for ind in creative for _ in range(8)]
        while len(plan) < self.cfg.companies:
            plan.append((bool(rng.random() < 0.25), self._pick(names.INDUSTRIES)))
        taken: set[str] = set()
        for unseen, industry in plan:
            city = self.entities[self._pick(self.region_cities[unseen])]
            while True:
                name = names.company_name(rng, industry, self.place_words, self.surnames)
                if name not in taken:
                    taken.add(name)
                    break
            founder = self.entities[self._pick(self.region_people[unseen])]
            founded = min(2020, founder.attrs["birth_year"] + int(rng.integers(22, 60)))
            c = self._add("company", name, unseen, industry=industry, founded_year=founded,
                          employees=int(rng.integers(2, 4000)) * 10 + int(rng.integers(0, 10)))
            c.rels["headquartered_in"] = city.id
            c.rels["founder"] = founder.id
            while True:
                ceo = self._pick(self.region_people[unseen])
                if ceo != founder.id and self.entities[ceo].attrs["birth_year"] >= 1935:
                    break
            c.rels["ceo"] = ceo
        self.region_companies = {u: [c for c in self.by_type["company"] if self.entities[c].unseen == u]
                                 for u in (False, True)}
        for u, comps in self.region_companies.items():
            ordered = sorted(comps, key=lambda cid: (self.entities[cid].attrs["founded_year"], cid))
            for i, cid in enumerate(ordered):
                # A parent is strictly older, so parent chains never loop.
                older = [o for o in ordered[:i] if self.entities[o].attrs["founded_year"]
                         < self.entities[cid].attrs["founded_year"]]
                if older and rng.random() < 0.3:
                    self.entities[cid].rels["parent_company"] = self._pick(older[-200:])

    def _person_links(self):
        rng = self.rng
        for unseen in (False, True):
            pids = self.region_people[unseen]
            for pid in pids:
                p = self.entities[pid]
                if rng.random() < 0.75:
                    p.rels["works_for"] = self._pick(self.region_companies[unseen])
                same_job = self.people_by_occupation[(unseen, p.attrs["occupation"])]
                for _ in range(6):  # a mentor is older, so mentor chains never loop
                    m = self._pick(same_job if rng.random() < 0.7 else pids)
                    if 5 <= p.attrs["birth_year"] - self.entities[m].attrs["birth_year"] <= 40:
                        if rng.random() < 0.6:
                            p.rels["mentor"] = m
                        break
            order = [pids[i] for i in rng.permutation(len(pids))]
            single = order[: int(len(order) * 0.45)]
            single.sort(key=lambda x: self.entities[x].attrs["birth_year"])
            for a, b in zip(single[0::2], single[1::2]):
                pa, pb = self.entities[a], self.entities[b]
                if abs(pa.attrs["birth_year"] - pb.attrs["birth_year"]) <= 12:
                    pa.rels["spouse"], pb.rels["spouse"] = b, a

    def _city_links(self):
        rng = self.rng
        born_here: dict[str, list[str]] = {}
        for pid in self.by_type["person"]:
            born_here.setdefault(self.entities[pid].rels["born_in"], []).append(pid)
        for unseen in (False, True):
            cities = self.region_cities[unseen]
            for cid in cities:
                local = [p for p in born_here.get(cid, []) if self.entities[p].attrs["birth_year"] >= 1930]
                pool = local or [p for p in self.region_people[unseen] if self.entities[p].attrs["birth_year"] >= 1930]
                self.entities[cid].rels["mayor"] = self._pick(pool)
            order = [cities[i] for i in rng.permutation(len(cities))]
            twinned = order[: int(len(order) * 0.6)]
            for a, b in zip(twinned[0::2], twinned[1::2]):
                self.entities[a].rels["sister_city"], self.entities[b].rels["sister_city"] = b, a

    def _works(self):
        rng = self.rng
        publishers = {(u, ind): [c for c in self.region_companies[u] if self.entities[c].attrs["industry"] == ind]
                      for u in (False, True) for ind in names.PUBLISHER_INDUSTRY.values()}
        keys: set[tuple[str, str, int]] = set()
        while len(self.by_type["work"]) < self.cfg.works:
            kind = self._pick(names.WORK_KINDS)
            unseen = bool(rng.random() < 0.25)
            creator = self.entities[self._pick(self.people_by_occupation[(unseen, names.CREATOR_OCCUPATION[kind])])]
            year = min(2023, creator.attrs["birth_year"] + int(rng.integers(20, 65)))
            title = names.work_title(rng, self.place_words, self.surnames)
            if (title, kind, year) in keys:
                continue
            keys.add((title, kind, year))
            w = self._add("work", title, unseen, year=year, genre=self._pick(names.GENRES[kind]), kind=kind)
            w.rels["creator"] = creator.id
            w.rels["publisher"] = self._pick(publishers[(unseen, names.PUBLISHER_INDUSTRY[kind])])
            if kind in ("novel", "film") and rng.random() < 0.7:
                w.rels["set_in"] = self._pick(self.region_cities[unseen])

    def _characters(self) -> list[Character]:
        rng = self.rng
        stories = [w for w in self.by_type["work"] if self.entities[w].attrs["kind"] in ("novel", "film")]
        out = []
        for i in range(self.cfg.characters):
            namesake = self.entities[self._pick(self.by_type["person"])]
            out.append(Character(
                id=f"chr-{i:05d}", name=namesake.name, work=self._pick(stories),
                occupation=self._pick(names.OCCUPATIONS), birth_year=int(rng.integers(1700, 1990)),
                city=self.entities[self._pick(self.by_type["city"])].name,
                company=self.entities[self._pick(self.by_type["company"])].name,
            ))
        return out

    # --- titles -------------------------------------------------------------------------------
    def _titles(self, characters: list[Character]):
        """Unique document titles: the bare name where it is unique, else name (disambiguator)."""
        groups: dict[tuple[str, str], list[Entity]] = {}
        for ent in self.entities.values():
            groups.setdefault((ent.type, ent.name), []).append(ent)
        for (etype, name), group in groups.items():
            if len(group) == 1:
                group[0].title = name
                continue
            for make in _DISAMBIGUATORS[etype]:
                titles = [f"{name} ({make(e)})" for e in group]
                if len(set(titles)) == len(titles):
                    for e, t in zip(group, titles):
                        e.title = t
                    break
            else:  # pragma: no cover - generation rejects such collisions
                raise RuntimeError(f"cannot disambiguate {etype} {name!r}")
        by_name: dict[str, list[Character]] = {}
        for ch in characters:
            by_name.setdefault(ch.name, []).append(ch)
        for name, group in by_name.items():
            for ch in group:
                ch.title = f"{name} (character)" if len(group) == 1 else \
                    f"{name} (character in {self.entities[ch.work].title})"
        # Titles are unique across types too; a rare clash gets the type appended.
        seen: set[str] = set()
        for ent in self.entities.values():
            if ent.title in seen:
                ent.title = f"{ent.title} [{ent.type}]"
            seen.add(ent.title)
        for ch in characters:
            if ch.title in seen:
                ch.title = f"{ch.title} [{ch.id}]"
            seen.add(ch.title)


_DISAMBIGUATORS = {
    "person": [lambda e: e.attrs["occupation"], lambda e: f"{e.attrs['occupation']}, born {e.attrs['birth_year']}"],
    "city": [lambda e: e.attrs["country"]],
    "company": [lambda e: e.attrs["industry"], lambda e: e.id],
    "work": [lambda e: e.attrs["kind"], lambda e: f"{e.attrs['kind']}, {e.attrs['year']}"],
}
