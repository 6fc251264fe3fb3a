"""Shopping goals: the instruction in words and WebShop's reward for a purchase.

A goal names a product type, the attributes the shopper wants, one value per option dimension
and a price ceiling. It is made from a target product, but any product that matches every
part of it earns the full reward, as in WebShop (Yao et al. 2022, eq. 1):

    reward = r_type * (|goal attrs matched| + |goal options matched| + [price <= ceiling])
                    / (|goal attrs| + |goal options| + 1)

r_type is 1 for the asked product type, 0.5 for another type of the same category and 0.1
for anything else (WebShop scores type by title and category overlap; ours are exact labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from agentgym.envs.webshop.catalog import Product

TEMPLATES = (
    "i need a {attrs} {type}{opts}, and price lower than {price} dollars",
    "i am looking for a {type} that is {attrs}{opts}, and price lower than {price} dollars",
    "find me a {attrs} {type}{opts}, with price lower than {price} dollars",
    "i want to buy a {type} which is {attrs}{opts}, and price lower than {price} dollars",
    "i'm searching for a {attrs} {type}{opts}, and price lower than {price} dollars",
)


PARAM_KEYS = frozenset({"asin", "category", "product_type", "attributes", "options", "price_upper"})


@dataclass(frozen=True)
class Goal:
    asin: str  # the product the goal was made from (one of possibly many full matches)
    category: str
    product_type: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]  # (dimension, wanted value), sorted by dimension
    price_upper: float
    phrasing: int = 0

    @classmethod
    def from_params(cls, params: Mapping, seed: int = 0) -> "Goal":
        """The goal of a task's params; ValueError for unknown keys (they would change the task
        id without changing the task) and missing or malformed ones."""
        unknown = set(params) - PARAM_KEYS
        if unknown:
            raise ValueError(f"unknown web shop task params {sorted(unknown)}; expected {sorted(PARAM_KEYS)}")
        if not isinstance(params.get("attributes"), list) or not isinstance(params.get("options", {}), dict):
            raise ValueError("web shop task params need 'attributes' as a list and 'options' as a dict")
        return cls(
            asin=str(params["asin"]),
            category=str(params["category"]),
            product_type=str(params["product_type"]),
            attributes=tuple(str(a) for a in params["attributes"]),
            options=tuple(sorted((str(k), str(v)) for k, v in dict(params.get("options", {})).items())),
            price_upper=float(params["price_upper"]),
            phrasing=seed % len(TEMPLATES),
        )

    def to_params(self) -> dict:
        return {
            "asin": self.asin, "category": self.category, "product_type": self.product_type,
            "attributes": list(self.attributes), "options": dict(self.options), "price_upper": self.price_upper,
        }

    @property
    def instruction(self) -> str:
        attrs = list(self.attributes)
        attr_text = attrs[0] if len(attrs) == 1 else ", ".join(attrs[:-1]) + " and " + attrs[-1]
        opts = ""
        if self.options:
            opts = " with " + ", and ".join(f"{dim}: {value}" for dim, value in self.options)
        return TEMPLATES[self.phrasing].format(attrs=attr_text, type=self.product_type, opts=opts,
                                               price=f"{self.price_upper:.2f}")


def reward(goal: Goal, product: Product, chosen: Mapping[str, str]) -> float:
    """WebShop's purchase reward in [0, 1]; exactly 1.0 when every part of the goal matches."""
    if product.product_type == goal.product_type:
        r_type = 1.0
    elif product.category == goal.category:
        r_type = 0.5
    else:
        r_type = 0.1
    matched_attrs = sum(a in product.attributes for a in goal.attributes)
    matched_opts = sum(chosen.get(dim) == value for dim, value in goal.options)
    price_ok = product.price <= goal.price_upper
    total = len(goal.attributes) + len(goal.options) + 1
    return r_type * (matched_attrs + matched_opts + price_ok) / total


def full_match_options(goal: Goal, product: Product) -> dict[str, str] | None:
    """The option choices that make buying `product` earn 1.0, or None if no choice can."""
    if reward(goal, product, dict(goal.options)) < 1.0:
        return None
    if any(value not in product.option_values(dim) for dim, value in goal.options):
        return None
    return dict(goal.options)
