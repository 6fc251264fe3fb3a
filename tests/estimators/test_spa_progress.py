"""SPA progress estimator: only the per-episode sum is supervised, yet credit lands on the right step."""

import numpy as np
import pytest
import torch

from agentgym.trainers.spa_progress import ProgressHead, fit_progress, predict_progress, progress_loss


def test_progress_loss_by_hand():
    # traj 1: sum 0.2 + 0.3 = 0.5, R = 1 -> (0.5 - 1)^2 = 0.25
    # traj 2: sum 1.0,             R = 0 -> 1.0
    # mean = 0.625
    loss = progress_loss([torch.tensor([0.2, 0.3]), torch.tensor([1.0])], [1.0, 0.0])
    assert loss.item() == pytest.approx(0.625)
    with pytest.raises(ValueError, match="outcomes"):
        progress_loss([torch.tensor([0.2])], [1.0, 0.0])


@pytest.fixture(autouse=True)
def one_torch_thread():
    # tiny matrices: extra threads only fight the other test processes for the 2 cores
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def synthetic(n=160, dim=6, seed=0):
    """Episodes of 3..8 steps with noise features; successful ones contain one 'key' step whose
    feature 0 is 1 (the step that made the episode succeed). R = 1 iff the key step happened."""
    gen = torch.Generator().manual_seed(seed)
    feats, outcomes, keys = [], [], []
    for i in range(n):
        length = int(torch.randint(3, 9, (1,), generator=gen))
        x = torch.randn(length, dim, generator=gen)
        x[:, 0] = 0.0
        success = i % 2 == 0
        key = int(torch.randint(0, length, (1,), generator=gen)) if success else None
        if success:
            x[key, 0] = 1.0
        feats.append(x)
        outcomes.append(1.0 if success else 0.0)
        keys.append(key)
    return feats, outcomes, keys


@pytest.mark.parametrize("hidden, batch_size, epochs, lr", [(None, None, 150, 3e-2), (16, 64, 60, 2e-2)])
def test_fit_progress_attributes_outcome_to_the_key_step(hidden, batch_size, epochs, lr):
    torch.manual_seed(0)
    feats, outcomes, keys = synthetic()
    head = ProgressHead(feats[0].shape[1], hidden=hidden)
    history = fit_progress(head, feats, outcomes, epochs=epochs, lr=lr, batch_size=batch_size)
    assert history[-1] < 0.1 * history[0]  # the sum fits
    # held-out episodes from the same process
    test_feats, test_outcomes, test_keys = synthetic(n=40, seed=1)
    contribs = predict_progress(head, test_feats)
    assert all(c.dtype == np.float32 and len(c) == len(f) for c, f in zip(contribs, test_feats))
    for c, r, key in zip(contribs, test_outcomes, test_keys):
        assert c.sum() == pytest.approx(r, abs=0.2)
        if key is not None:
            assert c[key] > 0.7  # the key step carries the success...
            others = np.delete(c, key)
        else:
            others = c
        assert np.abs(others).max() < 0.2  # ...and the other steps get almost nothing


def test_fit_progress_rejects_bad_input():
    head = ProgressHead(3)
    with pytest.raises(ValueError, match="2 trajectories but 1 outcomes"):
        fit_progress(head, [torch.zeros(2, 3), torch.zeros(1, 3)], [1.0], epochs=1)
    with pytest.raises(ValueError, match="steps, feature_size"):
        fit_progress(head, [torch.zeros(3)], [1.0], epochs=1)
    with pytest.raises(ValueError, match="non-finite"):
        fit_progress(head, [torch.zeros(2, 3)], [float("nan")], epochs=1)
