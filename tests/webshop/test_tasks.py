"""Catalog, goals, reward, task space and shipped splits of the web shop."""

import numpy as np
import pytest

from agentgym.envs.webshop.catalog import default_catalog, generate_catalog
from agentgym.envs.webshop.goal import Goal, reward
from agentgym.envs.webshop.search import default_engine
from agentgym.envs.webshop.tasks import ENV_ID, SEEN_CATEGORIES, WebShopTaskSpace, is_heldout_product
from agentgym.envs.webshop.vocab import CATEGORIES, UNSEEN_CATEGORIES
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import load_split
from agentgym.tasks import generation as _generation
from agentgym.tasks import validation as _validation

SPACE = WebShopTaskSpace()

# Pinned: the shipped splits name products by asin, so the generated catalog must never drift.
CATALOG_FINGERPRINT = "24583548bb4acdbb"


def test_catalog_is_big_varied_and_fixed():
    catalog = default_catalog()
    assert len(catalog) >= 5000
    assert len({p.category for p in catalog.products}) >= 20
    assert len({p.asin for p in catalog.products}) == len(catalog)
    assert all(p.price > 0 and p.attributes and p.title and p.description and p.features for p in catalog.products)
    assert sum(bool(p.options) for p in catalog.products) == len(catalog)
    assert catalog.fingerprint() == CATALOG_FINGERPRINT
    assert generate_catalog().fingerprint() == CATALOG_FINGERPRINT  # regenerating gives the same catalog


def test_option_values_never_collide_with_site_buttons_or_each_other():
    buttons = {"back to search", "< prev", "next >", "description", "features", "buy now", "search"}
    for category in CATEGORIES:
        values = [v for _, vs in category.options for v in vs]
        assert len(values) == len(set(values)), category.name
        assert not buttons & set(values)


def test_search_finds_matching_products_and_nothing_for_nonsense():
    engine = default_engine()
    hits = engine.search("sulfate free shampoo")
    assert 0 < len(hits) <= 50
    top = default_catalog().by_asin[hits[0]]
    assert top.product_type == "shampoo" and "sulfate free" in top.attributes
    assert engine.search("") == () and engine.search("zzqx qqzz") == () and engine.search("<script>") == ()
    assert engine.search("SULFATE free Shampoo!!") == hits  # case and punctuation do not matter


def test_reward_follows_webshop_formula():
    catalog = default_catalog()
    product = catalog.by_type["shampoo"][0]
    dim, values = product.options[0]
    goal = Goal(product.asin, product.category, "shampoo", product.attributes[:2], ((dim, values[0]),),
                price_upper=product.price + 1)
    assert reward(goal, product, {dim: values[0]}) == 1.0
    assert reward(goal, product, {}) == pytest.approx(3 / 4)  # option missed
    cheap = Goal(**{**goal.__dict__, "price_upper": product.price - 0.5})
    assert reward(cheap, product, {dim: values[0]}) == pytest.approx(3 / 4)
    other_type = catalog.by_type["hair oil"][0]  # same category, another type: r_type = 0.5
    assert reward(goal, other_type, {}) <= 0.5
    other_category = catalog.by_type["dog toy"][0]
    assert reward(goal, other_category, {}) <= 0.1


def test_instruction_reads_like_webshop():
    goal = Goal.from_params(SPACE.split("train")[0].params, 0)
    text = goal.instruction
    assert text.startswith("i need a") and goal.product_type in text and "price lower than" in text
    assert all(a in text for a in goal.attributes)
    assert all(f"{d}: {v}" in text for d, v in goal.options)


def test_sample_mutate_category_validate():
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(30):
        spec = SPACE.sample(rng)
        assert spec.params["category"] in SEEN_CATEGORIES
        assert not is_heldout_product(spec.params["asin"])
        cat = SPACE.category(spec)
        assert cat.split("/")[1] in ("easy", "medium", "hard")
        seen.add(cat)
        child = _generation.mutate(SPACE, spec, rng)
        assert child != spec and child.params["product_type"] == spec.params["product_type"]
        assert SPACE.solve(child) is not None
    assert len(seen) > 5
    hard = SPACE.sample(rng, n_attributes=3, n_options=2)
    assert len(hard.params["attributes"]) == 3
    unseen = SPACE.sample(rng, categories=UNSEEN_CATEGORIES)
    assert unseen.params["category"] in UNSEEN_CATEGORIES
    assert _validation.validate(SPACE, spec) and _validation.validate(SPACE, unseen)


def test_validate_rejects_impossible_and_malformed_goals():
    good = SPACE.split("train")[0]
    impossible = TaskSpec(ENV_ID, {**good.params, "price_upper": 0.5}, good.seed)  # nothing is that cheap
    assert SPACE.solve(impossible) is None and not _validation.validate(SPACE, impossible)
    bogus_option = TaskSpec(ENV_ID, {**good.params, "options": {"size": "galactic"}}, 0)
    assert not _validation.validate(SPACE, bogus_option)
    assert not _validation.validate(SPACE, TaskSpec(ENV_ID, {"asin": "nope"}, 0))  # missing keys: invalid, not a crash
    assert not _validation.validate(SPACE, TaskSpec(ENV_ID, {**good.params, "colour": "red"}, 0))  # unknown key
    assert not _validation.validate(SPACE, TaskSpec(ENV_ID, {**good.params, "attributes": "waterproof"}, 0))
    assert not _validation.validate(SPACE, TaskSpec(ENV_ID, {**good.params, "price_upper": "cheap"}, 0))


def test_splits_shipped_disjoint_and_reproducible():
    splits = {name: load_split(SPACE.split_dir / f"{name}.jsonl") for name in SPACE.split_names}
    assert [len(splits[n]) for n in ("train", "heldout", "heldout_unseen")] == [1000, 200, 200]
    ids = {name: {t.task_id for t in tasks} for name, tasks in splits.items()}
    assert not ids["train"] & ids["heldout"] and not ids["train"] & ids["heldout_unseen"]
    texts = {name: {Goal.from_params(t.params, t.seed).instruction for t in tasks} for name, tasks in splits.items()}
    assert not texts["train"] & texts["heldout"]  # unseen instructions
    assert {t.params["category"] for t in splits["heldout_unseen"]} <= set(UNSEEN_CATEGORIES)
    assert not {t.params["category"] for t in splits["train"]} & set(UNSEEN_CATEGORIES)
    assert all(is_heldout_product(t.params["asin"]) for t in splits["heldout"])
    assert _generation.build_splits(SPACE) == splits  # the manifests are what the generator makes


def test_parse_reads_instructions_and_json():
    spec = _generation.parse(SPACE, "i need a sulfate free shampoo with size: 3.4 fl oz, and price lower than 70 dollars")
    assert spec is None or spec.params["product_type"] == "shampoo"
    spec = _generation.parse(SPACE, "find me a waterproof running shoe with size: size 9, and price lower than 150.00 dollars")
    assert spec is not None and spec.params["product_type"] == "running shoe"
    assert spec.params["options"] == {"size": "size 9"} and "waterproof" in spec.params["attributes"]
    assert _validation.validate(SPACE, spec)
    train = SPACE.split("train")[3]
    assert _generation.parse(SPACE, '{"params": %s, "seed": 3}' % __import__("json").dumps(dict(train.params))) is not None
    assert _generation.parse(SPACE, "buy me a spaceship") is None
    assert _generation.parse(SPACE, "i need a unicorn-free shampoo under no budget") is None
