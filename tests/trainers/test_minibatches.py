"""Equal-size minibatches (the per-minibatch ratio log is tested in test_update.py)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentgym.trainers.training import equal_minibatches  # noqa: E402


@pytest.mark.parametrize("n,size", [(282, 128), (128, 128), (129, 128), (7, 3), (1, 64), (300, 64)])
def test_minibatches_cover_every_sample_once_and_differ_by_at_most_one(n, size):
    order = np.random.default_rng(0).permutation(n)
    chunks = equal_minibatches(order, size)
    sizes = [len(c) for c in chunks]
    assert len(chunks) == -(-n // size)  # ceil: as many optimizer steps as slicing by `size` gives
    assert max(sizes) <= size and max(sizes) - min(sizes) <= 1
    np.testing.assert_array_equal(np.concatenate(chunks), order)


def test_no_samples_no_minibatches():
    assert equal_minibatches(np.arange(0), 64) == []
