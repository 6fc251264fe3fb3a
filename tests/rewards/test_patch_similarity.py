"""SWE-RL's patch-similarity reward on known diffs."""

import time

import pytest

from agentgym.rewards.patch import patch_similarity

REF = """diff --git a/calc/ops.py b/calc/ops.py
index 3b18e51..a9c2f4d 100644
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,4 +1,4 @@
 def add(a, b):
-    return a - b
+    return a + b
 
 def mul(a, b):
"""

OTHER_FILE = """diff --git a/calc/util.py b/calc/util.py
--- a/calc/util.py
+++ b/calc/util.py
@@ -1 +1 @@
-X = 1
+X = 2
"""


def test_identical_is_one_and_empty_is_minus_one():
    assert patch_similarity(REF, REF).score == 1.0
    for empty in (None, "", "  \n"):
        r = patch_similarity(empty, REF)
        assert r.score == -1.0 and "no patch" in r.note


@pytest.mark.parametrize("bad", ["I fixed it!", "--- a/x.py\n+++ b/x.py\nnot a hunk\n",
                                 "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n?b\n",
                                 "Here is the patch:\n" + REF])
def test_malformed_is_minus_one(bad):
    r = patch_similarity(bad, REF)
    assert r.score == -1.0 and "malformed" in r.note and "\n" not in r.note


def test_similarity_compares_the_edits_token_by_token():
    """What is compared is what the patch takes out and writes, token by token, at its line."""
    swapped = REF.replace("return a + b", "return b + a")  # removes `a - b`, writes `b + a`: 2 of 3 / 2 of 3
    assert patch_similarity(swapped, REF).score == pytest.approx(2 / 3 * 2 / 3)
    # index lines (blob hashes), the order of files and the context lines do not count
    no_index = REF.replace("index 3b18e51..a9c2f4d 100644\n", "")
    assert patch_similarity(no_index, REF).score == 1.0
    assert patch_similarity(OTHER_FILE + REF, REF + OTHER_FILE).score == 1.0
    no_context = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -2 +2 @@\n-    return a - b\n+    return a + b\n"
    assert patch_similarity(no_context, REF).score == 1.0  # a plain `diff -U0`: the same edit at the same line
    # the same edit on another line matches nothing
    assert patch_similarity(no_context.replace("@@ -2 +2 @@", "@@ -7 +7 @@"), REF).score == 0.0


def test_binary_sections_are_left_out_with_a_note():
    binary = "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nGIT binary patch\nliteral 12\nzcmV\n"
    r = patch_similarity(binary + REF, REF)
    assert r.score == 1.0 and "binary files left out" in r.note and "logo.png" in r.note
    only = patch_similarity(binary, REF)
    assert only.score == -1.0 and "no text patch" in only.note


def test_huge_patch_is_cut_and_bounded_in_time():
    big = "diff --git a/big.py b/big.py\n--- a/big.py\n+++ b/big.py\n@@ -1,1 +1,40000 @@\n" + \
        "".join(f"+line {i} = {i * 7}\n" for i in range(40000))
    t0 = time.perf_counter()
    r = patch_similarity(big, REF, max_chars=20_000)
    assert time.perf_counter() - t0 < 10
    assert 0.0 <= r.score < 0.5 and "cut to 20000" in r.note and "\n" not in r.note


@pytest.mark.parametrize("trivial", [
    "    return a  -  b",            # spaces between tokens
    "    return a - b   ",           # trailing spaces
    "    return a - b  # fixed",     # a comment on the buggy line
])
def test_an_edit_that_changes_no_code_is_no_change(trivial):
    """Issue 52, item 5: a whitespace change on the buggy line, bug left in, scored ~0.96."""
    touched = REF.replace("+    return a + b", "+" + trivial)
    r = patch_similarity(touched, REF)
    assert r.score == -1.0 and "no code change" in r.note


def test_trivial_hunks_are_left_out_and_real_changes_still_count():
    comment_elsewhere = ("diff --git a/calc/util.py b/calc/util.py\n--- a/calc/util.py\n+++ b/calc/util.py\n"
                         "@@ -1,2 +1,3 @@\n X = 1\n+# a note\n+\n Y = 2\n")
    r = patch_similarity(REF + comment_elsewhere, REF)
    assert r.score == 1.0 and "no code change left out" in r.note
    # indentation, string contents and the operator are code
    for real in ("        return a - b", "    return 'a  - b'", "    return a * b"):
        assert patch_similarity(REF.replace("+    return a + b", "+" + real), REF).score > -1.0, real
    # a wrong edit of the right line writes none of the fix's tokens
    assert patch_similarity(REF.replace("+    return a + b", "+    return a * b"), REF).score == 0.0
