"""The generated world and its encyclopedia: deterministic, big enough, and full of namesakes."""

from collections import Counter

from agentgym.envs.search.corpus import render_corpus
from agentgym.envs.search.world import RELATIONS, WorldConfig, generate_world


def _small(seed):
    cfg = WorldConfig(cities=60, people=600, companies=150, works=400, characters=100)
    return generate_world.__wrapped__(seed, cfg)


def test_same_seed_same_world_other_seed_other_world():
    a, b, c = _small(3), _small(3), _small(4)
    key = lambda w: [(e.id, e.title, sorted(e.attrs.items()), sorted(e.rels.items())) for e in w.entities.values()]
    assert key(a) == key(b)
    assert key(a) != key(c)
    assert [d.text for d in render_corpus(a)] == [d.text for d in render_corpus(b)]


def test_corpus_has_at_least_20000_unique_documents(source):
    docs = source.docs
    assert len(docs) >= 20_000
    assert len({d.id for d in docs}) == len(docs)
    assert len({d.title for d in docs}) == len(docs)
    kinds = Counter(d.id[:3] for d in docs)
    # entity articles plus every distractor family
    assert {"per", "cit", "com", "wrk", "chr", "yr-", "lst", "dis"} <= set(kinds)
    assert kinds["chr"] + kinds["yr-"] + kinds["lst"] + kinds["dis"] >= 5_000


def test_distractors_share_names_with_people(world, source):
    names = Counter(world.get(p).name for p in world.by_type["person"])
    assert sum(1 for n in names.values() if n > 1) >= 200  # namesakes among real people
    person_names = set(names)
    assert sum(ch.name in person_names for ch in world.characters) == len(world.characters)
    # a character's article names a real person's name with other facts
    ch = world.characters[0]
    doc = source.lookup(ch.id)
    assert ch.name in doc.text and "fictional character" in doc.text


def test_relations_are_typed_functional_and_stay_in_their_region(world):
    for ent in world.entities.values():
        for rel, target in ent.rels.items():
            src_type, dst_type = RELATIONS[rel]
            assert ent.type == src_type and world.get(target).type == dst_type
            assert world.get(target).unseen == ent.unseen
            assert target != ent.id
    unseen = sum(e.unseen for e in world.entities.values())
    assert 0.15 < unseen / len(world.entities) < 0.35


def test_mentor_and_parent_chains_never_loop(world):
    for ent in world.entities.values():
        for rel in ("mentor", "parent_company"):
            seen, current = set(), ent.id
            while current is not None:
                assert current not in seen
                seen.add(current)
                current = world.get(current).rels.get(rel)


def test_articles_state_their_entitys_facts(world, source):
    p = world.get("per-00010")
    text = source.lookup(p.id).text
    assert str(p.attrs["birth_year"]) in text and p.attrs["occupation"] in text
    assert world.get(p.rels["born_in"]).title in text
    company = world.get("com-00010")
    text = source.lookup(company.id).text
    assert company.display("employees") in text
    assert world.get(company.rels["founder"]).title in text
