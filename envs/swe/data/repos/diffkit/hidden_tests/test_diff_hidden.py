import pytest

from diffkit import PatchError, apply_ops, diff_ops, similarity, unified_diff


def test_insert_and_delete():
    """A changed line is a deletion followed by an insertion."""
    assert diff_ops(["a", "b", "c"], ["a", "x", "c"]) == [(" ", "a"), ("-", "b"), ("+", "x"), (" ", "c")]


def test_pure_insertions_and_deletions():
    """Diffs against empty lists are all insertions or all deletions."""
    assert diff_ops([], ["a"]) == [("+", "a")]
    assert diff_ops(["a", "b"], []) == [("-", "a"), ("-", "b")]


def test_apply_round_trip():
    """Applying the diff of a to b turns a into b."""
    a = "the quick brown fox jumps over the lazy dog".split()
    b = "a quick brown cat jumps over the dog today".split()
    assert apply_ops(a, diff_ops(a, b)) == b


def test_apply_mismatch():
    """A patch that does not match the input raises PatchError."""
    ops = diff_ops(["a", "b"], ["a", "c"])
    with pytest.raises(PatchError):
        apply_ops(["z", "b"], ops)
    with pytest.raises(PatchError):
        apply_ops(["a", "b", "extra"], ops)


def test_similarity():
    """similarity is 2*matches/total."""
    assert similarity([], []) == 1.0
    assert similarity(["a", "b"], ["a", "c"]) == 0.5
    assert similarity(["a"], ["b"]) == 0.0


def test_unified_diff_single_hunk():
    """A single change gives one hunk with headers and counts."""
    a = ["1", "2", "3", "4", "5"]
    b = ["1", "2", "three", "4", "5"]
    assert unified_diff(a, b, context=1) == (
        "--- a\n+++ b\n@@ -2,3 +2,3 @@\n 2\n-3\n+three\n 4\n"
    )


def test_unified_diff_no_changes():
    """Equal inputs give an empty diff."""
    assert unified_diff(["x"], ["x"]) == ""


def test_unified_diff_separate_hunks():
    """Changes far apart make separate hunks; near ones merge."""
    a = [str(i) for i in range(20)]
    b = list(a)
    b[2] = "two"
    b[15] = "fifteen"
    text = unified_diff(a, b, context=2)
    assert text.count("@@ -") == 2
    assert "@@ -1,5 +1,5 @@" in text
    assert "@@ -14,5 +14,5 @@" in text
    b2 = list(a)
    b2[2], b2[5] = "two", "five"
    assert unified_diff(a, b2, context=2).count("@@ -") == 1
