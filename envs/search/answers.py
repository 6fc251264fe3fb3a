"""Answer grading: exact match after normalization (success) and token F1 (score).

Normalization follows the SQuAD/HotpotQA convention (lower case, no punctuation, no articles,
single spaces), so scores are comparable with published numbers on real data. Thousands
separators vanish with the punctuation: "12,057" and "12057" are the same answer.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

_PUNCT = set(string.punctuation) | {"\u2018", "\u2019", "\u201c", "\u201d", "\u2013", "\u2014"}
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    # yes/no answers get no partial credit, as in HotpotQA's evaluation.
    if {" ".join(pred), " ".join(ref)} & {"yes", "no"} and pred != ref:
        return 0.0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def grade(prediction: str, golds: list[str]) -> tuple[bool, float]:
    """(exact match against any gold alias, best token F1)."""
    if not golds:
        return False, 0.0
    success = any(exact_match(prediction, g) for g in golds)
    return success, 1.0 if success else max(token_f1(prediction, g) for g in golds)
