"""The web shop's task space: goals drawn from the catalog, the oracle, splits.

A task's params are a goal (goal.py): product type, wanted attributes, option values and a
price ceiling, plus the catalog product it was made from. The seed picks the instruction's
phrasing. Splits:
- train: goals from products outside the held-out product set, in the seen categories;
- heldout: goals from held-out products of the seen categories (instructions never in train);
- heldout_unseen: goals from the categories in vocab.UNSEEN_CATEGORIES, never in train.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from pathlib import Path

import numpy as np

from agentgym.envs.webshop.catalog import Product, default_catalog
from agentgym.envs.webshop.goal import Goal, full_match_options
from agentgym.envs.webshop.pages import BUY, NEXT
from agentgym.tasks.space import check_schema
from agentgym.envs.webshop.search import RESULTS_PER_PAGE, default_engine
from agentgym.envs.webshop.vocab import CATEGORIES, UNSEEN_CATEGORIES
from agentgym.tasks.generation import parse_json
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec

ENV_ID = "agentgym/WebShop-v0"
SEEN_CATEGORIES = tuple(c.name for c in CATEGORIES if c.name not in UNSEEN_CATEGORIES)
MAX_PLAN = 15  # the registered step limit
SPLIT_SIZES = {"train": 1000, "heldout": 200, "heldout_unseen": 200}


def is_heldout_product(asin: str) -> bool:
    """One product in ten is reserved as a target for held-out goals (a fixed hash, not a draw)."""
    return hashlib.sha256(asin.encode()).digest()[0] < 26


def price_ceiling(price: float, slack: float) -> float:
    """A round price limit above `price` ("lower than 40.00 dollars")."""
    step = 5 if price < 30 else 10 if price < 150 else 50
    upper = math.ceil(price * slack / step) * step
    return float(upper if upper > price else upper + step)


def goal_from_product(product: Product, rng: np.random.Generator, n_attributes: int | None = None,
                      n_options: int | None = None) -> Goal:
    attrs = list(product.attributes)
    k = int(n_attributes) if n_attributes is not None else int(rng.integers(1, min(3, len(attrs)) + 1))
    k = max(1, min(k, len(attrs)))
    picked = sorted(rng.choice(len(attrs), size=k, replace=False).tolist())
    dims = list(product.options)
    m = len(dims) if n_options is None else max(0, min(int(n_options), len(dims)))
    options = {dim: values[int(rng.integers(len(values)))] for dim, values in dims[:m]}
    return Goal(asin=product.asin, category=product.category, product_type=product.product_type,
                attributes=tuple(attrs[i] for i in picked), options=tuple(sorted(options.items())),
                price_upper=price_ceiling(product.price, float(rng.choice([1.05, 1.2, 1.5]))))


def difficulty(goal: Goal) -> str:
    n = len(goal.attributes) + len(goal.options)
    return "easy" if n <= 2 else "medium" if n == 3 else "hard"


@functools.lru_cache(maxsize=64)
def _product_pool(categories: tuple[str, ...], heldout_products: bool | None) -> tuple[Product, ...]:
    return tuple(p for p in default_catalog().products if p.category in categories
                 and (heldout_products is None or is_heldout_product(p.asin) == heldout_products))


class WebShopTaskSpace(TaskSpace):
    """Web shop tasks: an instruction asks for a product type with some attributes (e.g.
    "sulfate free"), option values (e.g. "size: large", "color: navy blue") and a price ceiling.
    Params: {"asin", "category", "product_type", "attributes": [...], "options": {dim: value},
    "price_upper"}; seed picks the phrasing. Proposals may also be written as an instruction,
    e.g. "i need a waterproof running shoe with size: size 9, and price lower than 80 dollars"."""

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"

    # --- sampling -------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, categories: tuple[str, ...] | None = None,
               n_attributes: int | None = None, n_options: int | None = None,
               heldout_products: bool | None = False) -> TaskSpec:
        """A valid task. `heldout_products`: False excludes held-out targets, True uses only them,
        None ignores the distinction."""
        allowed = tuple(sorted(set(categories or SEEN_CATEGORIES)))
        pool = _product_pool(allowed, heldout_products)
        if not pool:
            raise ValueError(f"no products in categories {sorted(allowed)}")
        for _ in range(100):
            product = pool[int(rng.integers(len(pool)))]
            goal = goal_from_product(product, rng, n_attributes, n_options)
            spec = TaskSpec(self.env_id, goal.to_params(), int(rng.integers(1 << 31)))
            if self.solve(spec) is not None:
                return spec
        raise RuntimeError("could not sample a solvable web shop task in 100 tries")

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """A nearby task: same product type, a sibling target product or other wanted
        attributes, options and price slack, and sometimes another phrasing."""
        goal = Goal.from_params(spec.params, spec.seed)
        catalog = default_catalog()
        target = catalog.by_asin.get(goal.asin)
        siblings = catalog.by_type.get(goal.product_type, [])
        if target is None or rng.random() < 0.5:
            target = siblings[int(rng.integers(len(siblings)))] if siblings else target
        if target is None:
            return self.sample(rng)
        n_attr = int(np.clip(len(goal.attributes) + int(rng.integers(-1, 2)), 1, 3))
        seed = spec.seed if rng.random() < 0.7 else int(rng.integers(1 << 31))
        for _ in range(20):
            new = TaskSpec(self.env_id, goal_from_product(target, rng, n_attr, len(goal.options)).to_params(), seed)
            if new != spec and self.solve(new) is not None:
                return new
        return self.sample(rng, categories=(goal.category,), heldout_products=None)

    def category(self, spec: TaskSpec) -> str:
        goal = Goal.from_params(spec.params, spec.seed)
        return f"{goal.category}/{difficulty(goal)}"

    # --- the oracle -----------------------------------------------------------------------------
    @staticmethod
    def oracle_query(goal: Goal) -> str:
        return " ".join((*goal.attributes, goal.product_type))

    def solve(self, spec: TaskSpec) -> list[str] | None:
        """Search with the goal's words, page through the results to the first product that
        matches every part of the goal, select the wanted options and buy it."""
        goal = Goal.from_params(spec.params, spec.seed)
        catalog, engine = default_catalog(), default_engine()
        target = catalog.by_asin.get(goal.asin)
        for query in (self.oracle_query(goal), target.title if target else None):
            if not query:
                continue
            for rank, asin in enumerate(engine.search(query)):
                options = full_match_options(goal, catalog.by_asin[asin])
                if options is None:
                    continue
                plan = [f"search[{query}]"] + [f"click[{NEXT}]"] * (rank // RESULTS_PER_PAGE)
                plan += [f"click[{asin}]"] + [f"click[{v}]" for _, v in sorted(options.items())] + [f"click[{BUY}]"]
                return plan if len(plan) <= MAX_PLAN else None
        return None

    # --- splits ---------------------------------------------------------------------------------
    def build_splits(self) -> dict[str, list[TaskSpec]]:
        rng = np.random.default_rng(20260522)
        train = self._distinct(rng, SPLIT_SIZES["train"], dict(heldout_products=False), set())
        seen_text = {self._instruction(t) for t in train}
        heldout = self._distinct(rng, SPLIT_SIZES["heldout"], dict(heldout_products=True), seen_text)
        unseen = self._distinct(rng, SPLIT_SIZES["heldout_unseen"],
                                dict(categories=UNSEEN_CATEGORIES, heldout_products=None), seen_text)
        return {"train": train, "heldout": heldout, "heldout_unseen": unseen}

    def _distinct(self, rng, n: int, kwargs: dict, exclude_text: set[str]) -> list[TaskSpec]:
        tasks, texts = [], set(exclude_text)
        while len(tasks) < n:
            spec = self.sample(rng, **kwargs)
            text = self._instruction(spec)
            if text not in texts:
                texts.add(text)
                tasks.append(spec)
        return tasks

    @staticmethod
    def _instruction(spec: TaskSpec) -> str:
        return Goal.from_params(spec.params, spec.seed).instruction

    # --- validation and held-out regions -----------------------------------------------------
    def check_params(self, params: dict) -> dict:
        p = check_schema(params, {"asin": str, "category": str, "product_type": str, "attributes": list,
                                  "options": dict, "price_upper": float}, what="WebShop")
        if not all(isinstance(a, str) for a in p["attributes"]):
            raise TypeError("attributes must be a list of strings")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in p["options"].items()):
            raise TypeError("options must map option names to strings")
        if p["asin"] not in default_catalog().by_asin:
            raise ValueError(f"unknown product asin {p['asin'][:40]!r}")
        return p

    def reserved(self, spec: TaskSpec) -> bool:
        """Targets reserved for held-out goals (one product in ten) and the unseen categories."""
        p = spec.params
        return is_heldout_product(str(p.get("asin"))) or p.get("category") in UNSEEN_CATEGORIES

    # --- proposals in words ---------------------------------------------------------------------
    def parse(self, text: str) -> TaskSpec | None:
        """Read an instruction ("i need a sulfate free shampoo ... lower than 30 dollars") or,
        failing that, the JSON params the base class reads."""
        spec = self._parse_instruction(text)
        if spec is None:
            spec = parse_json(self, text)
            try:
                if spec is not None and self.solve(spec) is None:
                    spec = None
            except (KeyError, ValueError, TypeError):
                spec = None
        return spec

    def _parse_instruction(self, text: str) -> TaskSpec | None:
        lowered = " ".join(text.lower().split())
        catalog = default_catalog()
        types = sorted(catalog.type_category, key=len, reverse=True)
        product_type = next((t for t in types if re.search(rf"\b{re.escape(t)}\b", lowered)), None)
        price = re.search(r"(?:lower|less) than \$?(\d+(?:\.\d+)?)", lowered)
        if product_type is None or price is None:
            return None
        category = catalog.categories[catalog.type_category[product_type]]
        attributes = [a for a in category.attributes if re.search(rf"\b{re.escape(a)}\b", lowered)]
        options = {}
        for dim, values in category.options:
            for value in sorted(values, key=len, reverse=True):
                if re.search(rf"{re.escape(dim)}:? {re.escape(value)}\b", lowered):
                    options[dim] = value
                    break
        if not attributes:
            return None
        for product in catalog.by_type[product_type]:
            goal = Goal(product.asin, category.name, product_type, tuple(attributes),
                        tuple(sorted(options.items())), float(price.group(1)))
            if full_match_options(goal, product) is not None:
                spec = TaskSpec(self.env_id, goal.to_params(), 0)
                return spec if self.solve(spec) is not None else None
        return None
