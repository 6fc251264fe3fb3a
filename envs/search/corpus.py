"""The encyclopedia: documents written from a generated world, or read from a JSONL file.

Besides one article per entity, the corpus holds distractor documents that share names and
facts with the articles: fictional characters named after real people (with other facts),
"<year> in <country>" chronicles, lists of people from each city, and disambiguation pages.
They make the same name come up in many search results, so an agent must read to pick the
right document.

User corpora are JSONL, one document per line: {"id": str, "title": str, "text": str}
("title" is optional and defaults to the id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from agentgym.envs.search.names import article
from agentgym.envs.search.world import Entity, World
from agentgym.errors import ConfigError
from agentgym.safe_files import read_jsonl


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


def _mention(world: World, entity_id: str) -> str:
    return world.entities[entity_id].title


def _pronoun(ent: Entity, capital: bool = True) -> str:
    p = {"f": "she", "m": "he"}.get(ent.gender, "they")
    return p.capitalize() if capital else p


def render_corpus(world: World) -> list[Document]:
    """Every document of the world's encyclopedia, in a fixed order."""
    links = _inverse_links(world)
    docs: list[Document] = []
    for eid, ent in world.entities.items():
        docs.append(Document(eid, ent.title, _ARTICLE[ent.type](world, ent, links.get(eid, {}))))
    docs += _character_docs(world)
    docs += _chronicle_docs(world)
    docs += _people_from_docs(world, links)
    docs += _disambiguation_docs(world)
    return docs


def _inverse_links(world: World) -> dict[str, dict[str, list[str]]]:
    """target id -> relation -> source ids, so articles can state facts from both ends."""
    inverse: dict[str, dict[str, list[str]]] = {}
    for eid, ent in world.entities.items():
        for rel, target in ent.rels.items():
            inverse.setdefault(target, {}).setdefault(rel, []).append(eid)
    return inverse


def _listing(world: World, ids: list[str], limit: int = 6) -> str:
    shown = [_mention(world, i) for i in ids[:limit]]
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _person_article(world: World, p: Entity, inv: dict[str, list[str]]) -> str:
    she, her = _pronoun(p), {"f": "Her", "m": "His"}.get(p.gender, "Their")
    city = world.get(p.rels["born_in"])
    job = p.attrs["occupation"]
    s = [f"{p.name} (born {p.attrs['birth_year']}) is {article(job)} {job} from {city.attrs['country']}.",
         f"{she} was born in {p.attrs['birth_year']} in {city.title}, {city.attrs['country']}."]
    if "works_for" in p.rels:
        s.append(f"{she} works for {_mention(world, p.rels['works_for'])}.")
    if "spouse" in p.rels:
        s.append(f"{she} is married to {_mention(world, p.rels['spouse'])}.")
    if "mentor" in p.rels:
        s.append(f"{she} was trained by {her.lower()} mentor {_mention(world, p.rels['mentor'])}.")
    if "founder" in inv:
        s.append(f"{she} founded {_listing(world, inv['founder'])}.")
    if "ceo" in inv:
        s.append(f"{she} is the chief executive of {_listing(world, inv['ceo'])}.")
    if "mayor" in inv:
        s.append(f"{she} serves as mayor of {_listing(world, inv['mayor'])}.")
    if "creator" in inv:
        s.append(f"{her} works include {_listing(world, inv['creator'])}.")
    if "mentor" in inv:
        s.append(f"{her} students include {_listing(world, inv['mentor'], 4)}.")
    return " ".join(s)


def _city_article(world: World, c: Entity, inv: dict[str, list[str]]) -> str:
    a = c.attrs
    s = [f"{c.name} is a city in {a['country']}.",
         f"It was founded in {a['founded_year']} and has a population of {c.display('population')}.",
         f"The mayor of {c.name} is {_mention(world, c.rels['mayor'])}."]
    if "sister_city" in c.rels:
        sister = world.get(c.rels["sister_city"])
        s.append(f"{c.name} is a sister city of {sister.title} in {sister.attrs['country']}.")
    if "headquartered_in" in inv:
        s.append(f"Companies based in {c.name} include {_listing(world, inv['headquartered_in'], 5)}.")
    if "set_in" in inv:
        s.append(f"Works set in {c.name} include {_listing(world, inv['set_in'], 4)}.")
    return " ".join(s)


def _company_article(world: World, c: Entity, inv: dict[str, list[str]]) -> str:
    a = c.attrs
    hq = world.get(c.rels["headquartered_in"])
    s = [f"{c.name} is {article(a['industry'])} {a['industry']} company headquartered in {hq.title}, "
         f"{hq.attrs['country']}.",
         f"It was founded in {a['founded_year']} by {_mention(world, c.rels['founder'])}.",
         f"Its chief executive is {_mention(world, c.rels['ceo'])}.",
         f"The company employs {c.display('employees')} people."]
    if "parent_company" in c.rels:
        s.append(f"{c.name} is a subsidiary of its parent company {_mention(world, c.rels['parent_company'])}.")
    if "parent_company" in inv:
        s.append(f"Its subsidiaries include {_listing(world, inv['parent_company'], 4)}.")
    if "publisher" in inv:
        s.append(f"Works released by {c.name} include {_listing(world, inv['publisher'], 5)}.")
    if "works_for" in inv:
        s.append(f"Notable employees include {_listing(world, inv['works_for'], 4)}.")
    return " ".join(s)


_CREATOR_VERB = {"novel": "written by", "film": "directed by", "album": "recorded by", "painting": "painted by"}
_PUBLISH_VERB = {"novel": "published", "film": "distributed", "album": "released", "painting": "sold"}


def _work_article(world: World, w: Entity, inv: dict[str, list[str]]) -> str:
    a = w.attrs
    s = [f"{w.name} is a {a['year']} {a['genre']} {a['kind']} {_CREATOR_VERB[a['kind']]} "
         f"{_mention(world, w.rels['creator'])}.",
         f"It was first {_PUBLISH_VERB[a['kind']]} in {a['year']} by {_mention(world, w.rels['publisher'])}."]
    if "set_in" in w.rels:
        s.append(f"The story is set in the city of {_mention(world, w.rels['set_in'])}.")
    return " ".join(s)


_ARTICLE = {"person": _person_article, "city": _city_article, "company": _company_article, "work": _work_article}


def _character_docs(world: World) -> list[Document]:
    docs = []
    for ch in world.characters:
        work = world.get(ch.work)
        job = f"{article(ch.occupation)} {ch.occupation}"
        text = (f"{ch.name} is a fictional character in the {work.attrs['kind']} {work.title} by "
                f"{_mention(world, work.rels['creator'])}. In the story, {ch.name} is {job} born in "
                f"{ch.birth_year} in {ch.city}, who works for {ch.company}. The character shares a name with "
                f"real people but none of their biography.")
        docs.append(Document(ch.id, ch.title, text))
    return docs


def _chronicle_docs(world: World) -> list[Document]:
    """'<year> in <country>': births, foundings and releases of one year, restating article facts."""
    events: dict[tuple[int, str], list[str]] = {}
    for ent in world.entities.values():
        if ent.type == "person":
            city = world.get(ent.rels["born_in"])
            key, line = (ent.attrs["birth_year"], city.attrs["country"]), \
                f"{ent.title}, {ent.attrs['occupation']}, is born in {city.title}."
        elif ent.type == "company":
            city = world.get(ent.rels["headquartered_in"])
            key, line = (ent.attrs["founded_year"], city.attrs["country"]), \
                f"{ent.title} is founded in {city.title} by {_mention(world, ent.rels['founder'])}."
        elif ent.type == "work":
            city = world.get(world.get(ent.rels["creator"]).rels["born_in"])
            key, line = (ent.attrs["year"], city.attrs["country"]), \
                f"The {ent.attrs['kind']} {ent.title} by {_mention(world, ent.rels['creator'])} appears."
        else:
            continue
        events.setdefault(key, []).append(line)
    docs = []
    for (year, country), lines in sorted(events.items()):
        if len(lines) < 2:
            continue
        title = f"{year} in {country}"
        text = f"Events of {year} in {country}: " + " ".join(lines)
        docs.append(Document(f"yr-{year}-{country.lower()}", title, text))
    return docs


def _people_from_docs(world: World, links) -> list[Document]:
    docs = []
    for cid in world.by_type["city"]:
        city = world.get(cid)
        born = links.get(cid, {}).get("born_in", [])
        if not born:
            continue
        lines = [f"{world.get(p).title} ({world.get(p).attrs['occupation']}, born {world.get(p).attrs['birth_year']})"
                 for p in born[:30]]
        text = f"People born in {city.title}, {city.attrs['country']}, include: " + "; ".join(lines) + "."
        docs.append(Document(f"lst-{cid}", f"List of people from {city.title}", text))
    return docs


def _disambiguation_docs(world: World) -> list[Document]:
    by_name: dict[str, list[str]] = {}
    for ent in world.entities.values():
        what = ent.type if ent.type != "work" else ent.attrs["kind"]
        by_name.setdefault(ent.name, []).append(f"{ent.title}, {article(what)} {what}")
    for ch in world.characters:
        by_name.setdefault(ch.name, []).append(f"{ch.title}, a fictional character")
    docs = []
    for i, (name, entries) in enumerate(sorted(by_name.items())):
        if len(entries) < 2:
            continue
        docs.append(Document(f"dis-{len(docs):05d}", f"{name} (disambiguation)",
                             f"{name} may refer to: " + "; ".join(entries) + "."))
    return docs


# --- user corpora -------------------------------------------------------------------------------
DOCUMENT_LINE = '{"id": ..., "title": ..., "text": ...}'


def load_corpus_jsonl(path: str | Path) -> list[Document]:
    """Documents from a JSONL file ({"id", "title"?, "text"} per line); a bad line is a ConfigError."""
    docs: list[Document] = []
    seen: set[str] = set()
    for lineno, doc in read_jsonl(path, "document", DOCUMENT_LINE, lambda obj: Document(
            str(obj["id"]), str(obj.get("title") or obj["id"]), str(obj["text"])), ConfigError, "corpus file"):
        if doc.id in seen:
            raise ConfigError(f"{path}:{lineno}: duplicate document id {doc.id!r}; ids must be unique")
        seen.add(doc.id)
        docs.append(doc)
    if not docs:
        raise ConfigError(f"corpus file {path} holds no documents")
    return docs


def save_corpus_jsonl(path: str | Path, docs: list[Document]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n")
