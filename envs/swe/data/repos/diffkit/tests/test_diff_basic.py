from diffkit import diff_ops, lcs_length


def test_identical_inputs():
    """Identical lists give only context operations."""
    assert diff_ops(["a", "b"], ["a", "b"]) == [(" ", "a"), (" ", "b")]


def test_lcs_length():
    """LCS of two short sequences."""
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4
