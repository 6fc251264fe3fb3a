import pytest

from agentgym.envs.search.answers import exact_match, grade, normalize_answer, token_f1


def test_normalization_ignores_case_punctuation_articles_and_separators():
    assert normalize_answer("  The Salt-Orchard! ") == "saltorchard"
    assert exact_match("12,057", "12057")
    assert exact_match("the silent harbour", "Silent Harbour")
    assert not exact_match("Silent Harbor", "Silent Harbour")


def test_token_f1_by_hand():
    # pred {mira, castell, jr}, gold {mira, castell}: p = 2/3, r = 1, F1 = 0.8
    assert token_f1("Mira Castell Jr", "Mira Castell") == pytest.approx(0.8)
    assert token_f1("nothing alike", "Mira Castell") == 0.0
    assert token_f1("", "x") == 0.0
    assert token_f1("yes", "no") == 0.0


def test_grade_takes_the_best_alias():
    assert grade("NYC", ["New York City", "NYC"]) == (True, 1.0)
    success, score = grade("New York", ["New York City", "NYC"])
    assert not success and score == pytest.approx(0.8)
    assert grade("anything", []) == (False, 0.0)
