"""Questions: structural specs render to one question with one answer, stated in its documents."""

import numpy as np
import pytest

from agentgym.envs.search.answers import normalize_answer
from agentgym.envs.search.questions import CATEGORIES, QuestionSampler, is_seen, is_unseen, resolve
from agentgym.envs.search.world import UNSEEN_RELATIONS


def _first_with(world, etype, *rels):
    return next(e for e in world.by_type[etype] if all(r in world.get(e).rels for r in rels))


def test_bridge_question_by_hand(world):
    pid = _first_with(world, "person", "works_for")
    p = world.get(pid)
    company = world.get(p.rels["works_for"])
    q = resolve(world, {"kind": "bridge", "start": pid, "path": ["works_for"], "attribute": "founded_year"})
    assert q.text == f"In what year was the company that employs {p.title} founded?"
    assert q.answers == (str(company.attrs["founded_year"]),)
    assert q.supporting == (pid, company.id) and q.hops == 2 and q.category == "bridge/2hop"


def test_composition_and_comparison_by_hand(world):
    cid = _first_with(world, "company", "founder")
    founder = world.get(world.get(cid).rels["founder"])
    q = resolve(world, {"kind": "composition", "start": cid, "path": ["founder", "born_in"], "attribute": "name"})
    assert q.answers[0] == world.get(founder.rels["born_in"]).name
    assert q.supporting == (cid, founder.id) and q.hops == 2
    a, b = world.get("cit-00001"), world.get("cit-00002")
    q = resolve(world, {"kind": "comparison", "attribute": "population", "form": "max",
                        "branches": [{"start": a.id, "path": []}, {"start": b.id, "path": []}]})
    bigger = a if a.attrs["population"] > b.attrs["population"] else b
    assert q.answers[0] == bigger.name and q.hops == 2 and q.supporting == (a.id, b.id)


def test_an_entity_answer_accepts_its_disambiguated_title(world):
    from agentgym.envs.search.answers import grade

    cid = next(c for c in world.by_type["company"] if "(" in world.get(world.get(c).rels["founder"]).title)
    founder = world.get(world.get(cid).rels["founder"])
    q = resolve(world, {"kind": "single", "start": cid, "path": ["founder"], "attribute": "name"})
    assert q.answers == (founder.name, founder.title)
    assert grade(founder.title, list(q.answers)) == (True, 1.0)
    assert grade(founder.name, list(q.answers)) == (True, 1.0)


@pytest.mark.parametrize("params, message", [
    ({"kind": "single", "start": "per-99999", "path": [], "attribute": "birth_year"}, "unknown start"),
    ({"kind": "single", "start": "per-00000", "path": ["mayor"], "attribute": "name"}, "does not apply"),
    ({"kind": "bridge", "start": "per-00000", "path": ["flies_to"], "attribute": "name"}, "unknown relation"),
    ({"kind": "bridge", "start": "per-00000", "path": [], "attribute": "height"}, "no attribute"),
    ({"kind": "riddle", "start": "per-00000"}, "kind must be"),
    ({"kind": "composition", "start": "per-00000", "path": "born_in", "attribute": "name"}, "list"),
    ({"kind": "comparison", "branches": [{"start": "per-00000"}], "attribute": "birth_year", "form": "min"}, "two"),
])
def test_invalid_specs_are_value_errors(world, params, message):
    with pytest.raises(ValueError, match=message):
        resolve(world, params)


def test_chains_that_loop_or_give_the_answer_away_are_rejected(world):
    pid = _first_with(world, "person", "spouse")
    with pytest.raises(ValueError, match="twice"):
        resolve(world, {"kind": "composition", "start": pid, "path": ["spouse", "spouse"], "attribute": "name"})
    # a namesake city's title carries its country: asking for the country would give it away
    city = next(c for c in world.by_type["city"] if "(" in world.get(c).title)
    with pytest.raises(ValueError, match="gives its answer away"):
        resolve(world, {"kind": "single", "start": city, "path": [], "attribute": "country"})


def test_answers_are_written_in_the_supporting_documents(world, source):
    sampler, rng = QuestionSampler(world), np.random.default_rng(0)
    for i in range(300):
        q = resolve(world, sampler.sample(rng, unseen=bool(i % 2)))
        assert 1 <= q.hops <= 4 and len(set(q.supporting)) == q.hops
        if q.answers[0] in ("yes", "no"):
            continue
        texts = " ".join(normalize_answer(source.lookup(d).text) for d in q.supporting)
        assert normalize_answer(q.answers[0]) in texts, q


def test_sampler_covers_every_category_and_respects_the_regions(world):
    sampler, rng = QuestionSampler(world), np.random.default_rng(1)
    for kind, hops in CATEGORIES:
        seen = sampler.sample(rng, kind=kind, hops=hops)
        q = resolve(world, seen)
        assert (q.kind, q.hops) == (kind, hops) and is_seen(world, seen)
        if (kind, hops) != ("comparison", 2):
            unseen = sampler.sample(rng, kind=kind, hops=hops, unseen=True)
            q = resolve(world, unseen)
            assert is_unseen(world, unseen) and set(q.relations) & UNSEEN_RELATIONS
    with pytest.raises(ValueError):
        sampler.sample(rng, kind="comparison", hops=2, unseen=True)
