"""The generated product catalog.

Built deterministically from a seed on first use (about a tenth of a second), so nothing large
ships with the package. The random stream is a SplitMix64 written here rather than numpy's or
Python's generators, whose streams may change between versions: product ids in the shipped
split manifests must mean the same product forever.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from agentgym.envs.webshop.vocab import (
    BRAND_SYLLABLES, CATEGORIES, DESCRIPTION_OPENERS, FEATURE_EXTRAS, Category,
)

CATALOG_SEED = 20260522
PRODUCTS_PER_TYPE = 60
_MASK = (1 << 64) - 1


class SplitMix64:
    """A tiny PRNG whose output is fixed by its definition (Steele, Lea & Flood 2014)."""

    def __init__(self, seed: int):
        self.state = seed & _MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * (self.next() >> 11) / float(1 << 53)

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def sample(self, seq, k: int) -> list:
        """k distinct items, in the order of `seq` (stable titles and option lists)."""
        pool = list(range(len(seq)))
        picked = []
        for _ in range(min(k, len(pool))):
            picked.append(pool.pop(self.below(len(pool))))
        return [seq[i] for i in sorted(picked)]


@dataclass(frozen=True)
class Product:
    asin: str
    title: str
    category: str
    product_type: str
    brand: str
    price: float
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]  # (dimension, values offered)
    description: str
    features: tuple[str, ...]

    def option_values(self, dim: str) -> tuple[str, ...]:
        return dict(self.options).get(dim, ())

    def search_text(self) -> str:
        return " ".join((self.title, self.product_type, self.category, " ".join(self.features)))


class Catalog:
    def __init__(self, products: list[Product]):
        self.products = products
        self.by_asin = {p.asin: p for p in products}
        self.categories = {c.name: c for c in CATEGORIES}
        self.type_category = {t: c.name for c in CATEGORIES for t in c.types}
        self.by_type: dict[str, list[Product]] = {}
        for p in products:
            self.by_type.setdefault(p.product_type, []).append(p)

    def __len__(self) -> int:
        return len(self.products)

    def fingerprint(self) -> str:
        """A digest of every product: tests pin it so the shipped splits keep their meaning."""
        h = hashlib.sha256()
        for p in self.products:
            h.update(repr(p).encode())
        return h.hexdigest()[:16]


def _brand(rng: SplitMix64) -> str:
    word = "".join(rng.choice(BRAND_SYLLABLES) for _ in range(2 + rng.below(2)))
    return word.capitalize()


def _asin(index: int) -> str:
    digest = hashlib.sha256(f"webshop-{CATALOG_SEED}-{index}".encode()).hexdigest().upper()
    return "B0" + digest[:8]


def _product(index: int, category: Category, product_type: str, rng: SplitMix64, brands: list[str]) -> Product:
    brand = rng.choice(brands)
    attributes = tuple(rng.sample(category.attributes, 2 + rng.below(3)))
    options = []
    for dim, values in category.options:
        offered = rng.sample(values, 2 + rng.below(max(1, len(values) - 1)))
        options.append((dim, tuple(offered)))
    lo, hi = category.price
    price = round(rng.uniform(lo, hi), 0) - 0.01 if rng.below(2) else round(rng.uniform(lo, hi), 2)
    price = max(price, 0.99)
    shown = attributes[: 1 + rng.below(len(attributes))]  # the title names some attributes, features all
    title = f"{brand} {' '.join(a.title() for a in shown)} {product_type.title()}"
    if category.options and rng.below(2):
        dim, values = options[0]
        title += f", {len(values)} {dim} options"
    description = " ".join((
        rng.choice(DESCRIPTION_OPENERS).format(brand=brand, type=product_type),
        f"It is {', '.join(attributes[:-1])} and {attributes[-1]}." if len(attributes) > 1 else f"It is {attributes[0]}.",
        rng.choice(FEATURE_EXTRAS),
    ))
    features = tuple(a.capitalize() for a in attributes) + (rng.choice(FEATURE_EXTRAS),)
    return Product(_asin(index), title, category.name, product_type, brand, price, attributes, tuple(options),
                   description, features)


def generate_catalog(seed: int = CATALOG_SEED, per_type: int = PRODUCTS_PER_TYPE) -> Catalog:
    rng = SplitMix64(seed)
    brands = sorted({_brand(rng) for _ in range(400)})
    products = []
    for category in CATEGORIES:
        for product_type in category.types:
            for _ in range(per_type):
                products.append(_product(len(products), category, product_type, rng, brands))
    if len({p.asin for p in products}) != len(products):  # 32-bit ids: a collision would be a bug here
        raise RuntimeError("asin collision in the generated catalog")
    return Catalog(products)


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    return generate_catalog()
