"""Each policy loss against its paper's equation, written out by hand on a small batch (loops over
rows and tokens, no shared helper), for the loss value and for the gradient w.r.t. the logprobs."""

import math

import pytest
import torch

from agentgym.errors import ConfigError
from agentgym.trainers.estimators import EstimatorConfig, estimator_spec
from agentgym.trainers.estimators.options import resolve_options
from agentgym.trainers.policy_losses import (POLICY_LOSSES, aggregate, clip_bounds, loss_denominator, policy_loss,
                                             reverse_cumsum)
from agentgym.trainers.ppo import ppo_clip_loss

# two responses: row 0 has 3 model tokens, row 1 has 2 (its last place is padding)
OLD = [[-1.0, -2.0, -0.5], [-1.5, -0.7, 0.0]]
# ratios chosen to land on both sides of every clip range below: 1.25, 0.7, 1.02 / 1.1, 0.9
RATIOS = [[1.25, 0.7, 1.02], [1.1, 0.9, 1.0]]
MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
ADV = [[1.0, 1.0, 1.0], [-0.5, -0.5, 0.0]]


def batch():
    old = torch.tensor(OLD)
    logp = (old + torch.log(torch.tensor(RATIOS))).clone().requires_grad_(True)
    return logp, old, torch.tensor(ADV), torch.tensor(MASK)


def grad_of(loss, logp):
    (g,) = torch.autograd.grad(loss, logp)
    return g


def ppo_term(r, a, lo, hi):
    return min(r * a, min(max(r, lo), hi) * a)


def test_registry_names_and_unknown_loss():
    assert set(POLICY_LOSSES) == {"ppo", "dapo", "dr_grpo", "gspo", "reinforce_pp", "cispo"}
    assert POLICY_LOSSES["ppo"] is ppo_clip_loss  # today's loss, unchanged
    with pytest.raises(ConfigError, match="choose one of") as err:
        policy_loss("ppo2")
    assert "\n" not in str(err.value)
    for name in ("dapo", "dr_grpo", "gspo", "reinforce_pp", "cispo"):
        assert estimator_spec(name).policy_loss == name


def test_dapo_clip_higher_token_level():
    """DAPO eq. 10: J = 1/sum_i|o_i| sum_i sum_t min(r A, clip(r, 1 - 0.2, 1 + 0.28) A)."""
    opts = resolve_options(estimator_spec("dapo"), {})
    lo, hi = clip_bounds(opts, 0.2, False)
    assert (lo, hi) == pytest.approx((0.8, 1.28))
    logp, old, adv, mask = batch()
    loss, st = POLICY_LOSSES["dapo"](logp, old, adv, mask, lo, hi, "token-mean")
    expected, n = 0.0, 0
    for i in range(2):
        for t in range(3):
            if MASK[i][t]:
                expected += ppo_term(RATIOS[i][t], ADV[i][t], lo, hi)
                n += 1
    assert float(loss.detach()) == pytest.approx(-expected / n, rel=1e-6)
    g = grad_of(loss, logp)
    # r = 1.25 with A > 0: inside DAPO's higher bound, so it still learns; PPO's 1.2 cuts it off
    assert g[0, 0] == pytest.approx(-1.25 * 1.0 / n, rel=1e-5)
    logp2, *_ = batch()
    ppo_loss, _ = ppo_clip_loss(logp2, old, adv, mask, 0.8, 1.2)
    assert grad_of(ppo_loss, logp2)[0, 0] == 0.0
    # r = 0.7 < 0.8 with A > 0: min picks the unclipped term, gradient kept (clip only binds one side)
    assert g[0, 1] == pytest.approx(-0.7 / n, rel=1e-5)
    assert st.clip_frac == pytest.approx(1 / 5)  # only 0.7 is outside [0.8, 1.28]


def test_dr_grpo_sums_tokens_over_a_constant():
    """Dr. GRPO: J = 1/G sum_i sum_t min(r A, clip(r) A) / L_max: no 1/|o_i|, so a longer response
    weighs more, and the normalizer does not depend on the lengths."""
    logp, old, adv, mask = batch()
    lmax = 8
    denom = loss_denominator("token-sum", float(mask.sum()), 2, lmax)
    assert denom == 16.0
    loss, _ = POLICY_LOSSES["dr_grpo"](logp, old, adv, mask, 0.8, 1.2, estimator_spec("dr_grpo").loss_agg, denom)
    expected = sum(ppo_term(RATIOS[i][t], ADV[i][t], 0.8, 1.2) for i in range(2) for t in range(3) if MASK[i][t])
    assert float(loss.detach()) == pytest.approx(-expected / (2 * lmax), rel=1e-6)
    # every unclipped token's gradient is r A / (G L_max), the same scale in both rows
    g = grad_of(loss, logp)
    assert g[0, 2] == pytest.approx(-1.02 / 16, rel=1e-5)
    assert g[1, 1] == pytest.approx(0.9 * 0.5 / 16, rel=1e-5)


def test_gspo_sequence_ratio():
    """GSPO eq. 5-7: s_i = exp(1/|y_i| sum_t log r_t); J = 1/G sum_i min(s_i A_i, clip(s_i) A_i)."""
    opts = resolve_options(estimator_spec("gspo"), {"clip_low": 0.05, "clip_high": 0.05})
    lo, hi = clip_bounds(opts, 0.2, False)
    logp, old, adv, mask = batch()
    loss, st = POLICY_LOSSES["gspo"](logp, old, adv, mask, lo, hi, "seq-mean")
    # the paper's sequence form, with autograd through s_i directly
    logp_ref, *_ = batch()
    terms = []
    for i in range(2):
        n = int(sum(MASK[i]))
        log_s = sum(logp_ref[i, t] - OLD[i][t] for t in range(n)) / n
        s = torch.exp(log_s)
        a = ADV[i][0]
        terms.append(torch.minimum(s * a, torch.clamp(s, lo, hi) * a))
    expected = -(terms[0] + terms[1]) / 2
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    g, g_ref = grad_of(loss, logp), grad_of(expected, logp_ref)
    assert torch.allclose(g * mask, g_ref * mask, atol=1e-7)
    s0 = math.exp((math.log(1.25) + math.log(0.7) + math.log(1.02)) / 3)
    s1 = math.exp((math.log(1.1) + math.log(0.9)) / 2)
    assert st.ratio_max == pytest.approx(max(s0, s1), rel=1e-5)


def test_gspo_clips_whole_sequences():
    logp, old, adv, mask = batch()
    # with the paper's tiny range both sequences sit below it (s_0 = 0.963, s_1 = 0.995). Row 1 has
    # A < 0, so the clipped branch is the minimum and the whole sequence gets no gradient; row 0
    # (A > 0) keeps the unclipped branch, and every one of its tokens gets the same gradient.
    loss, st = POLICY_LOSSES["gspo"](logp, old, adv, mask, 1 - 3e-4, 1 + 4e-4, "seq-mean")
    g = grad_of(loss, logp)
    assert torch.all(g[1] == 0)
    assert torch.allclose(g[0], g[0, 0].expand(3)) and g[0, 0] < 0
    assert st.clip_frac == 1.0


def test_reinforce_pp_kl_is_a_token_reward():
    """REINFORCE++: r_t = -beta KL_t (+ the outcome at the end); A'_t = A_t - beta sum_{k>=t} KL_k,
    KL_k = log pi_old - log pi_ref, then PPO's clipped surrogate, no KL loss term."""
    logp, old, adv, mask = batch()
    ref = old - torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 9.0]])  # KL_k = 0.1 .. 0.5; padding ignored
    beta = 0.5
    loss, st = POLICY_LOSSES["reinforce_pp"](logp, old, adv, mask, 0.8, 1.2, "token-mean", None, ref, beta)
    kl = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.0]]
    expected, n = 0.0, 0
    for i in range(2):
        for t in range(3):
            if MASK[i][t]:
                a = ADV[i][t] - beta * sum(kl[i][k] for k in range(t, 3) if MASK[i][k])
                expected += ppo_term(RATIOS[i][t], a, 0.8, 1.2)
                n += 1
    assert float(loss.detach()) == pytest.approx(-expected / n, rel=1e-5)
    assert st.kl == 0.0  # folded into the reward, not a loss term
    assert torch.equal(reverse_cumsum(torch.tensor([1.0, 2.0, 3.0])), torch.tensor([6.0, 5.0, 3.0]))


def test_cispo_keeps_every_tokens_gradient():
    """CISPO eq. 4-5: J = 1/sum|o_i| sum_i sum_t sg(clip(r, 1 - e_low, 1 + e_high)) A log pi(t)."""
    opts = resolve_options(estimator_spec("cispo"), {})
    lo, hi = clip_bounds(opts, 0.2, False)
    assert (lo, hi) == pytest.approx((0.0, 1.28))
    logp, old, adv, mask = batch()
    loss, _ = POLICY_LOSSES["cispo"](logp, old, adv, mask, lo, hi, "token-mean")
    expected, n = 0.0, 0
    for i in range(2):
        for t in range(3):
            if MASK[i][t]:
                w = min(max(RATIOS[i][t], lo), hi)
                expected += w * ADV[i][t] * (OLD[i][t] + math.log(RATIOS[i][t]))
                n += 1
    assert float(loss.detach()) == pytest.approx(-expected / n, rel=1e-5)
    g = grad_of(loss, logp)
    # the gradient is -sg(w) A / n per token; with a tight range the clipped token keeps its gradient
    logp2, *_ = batch()
    tight, _ = POLICY_LOSSES["cispo"](logp2, old, adv, mask, 0.0, 1.1, "token-mean")
    g_tight = grad_of(tight, logp2)
    assert g_tight[0, 0] == pytest.approx(-1.1 / n, rel=1e-5)  # r = 1.25 clipped to 1.1, still learns
    assert g[0, 0] == pytest.approx(-1.25 / n, rel=1e-5)


def test_aggregations_and_bad_names():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])
    m = torch.tensor(MASK)
    assert float(aggregate(x, m, "token-mean")) == pytest.approx(15 / 5)
    assert float(aggregate(x, m, "seq-mean")) == pytest.approx((2 + 4.5) / 2)
    assert float(aggregate(x, m, "token-sum", 12.0)) == pytest.approx(15 / 12)
    with pytest.raises(ConfigError, match="token-sum"):
        aggregate(x, m, "sum-of-means")


@pytest.mark.parametrize("name", ["dapo", "dr_grpo", "gspo", "reinforce_pp", "cispo"])
def test_async_corrections_refused_in_one_line(name):
    logp, old, adv, mask = batch()
    with pytest.raises(ConfigError, match="max_staleness=0") as err:
        POLICY_LOSSES[name](logp, old, adv, mask, 0.8, 1.2, "token-mean", is_cap=2.0)
    assert "\n" not in str(err.value)


def test_unknown_or_bad_loss_option_is_one_line():
    with pytest.raises(ConfigError, match="has no option 'clip_hihg'.*clip_high") as err:
        EstimatorConfig(name="dapo", options={"clip_hihg": 0.3})
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="finite number"):
        EstimatorConfig(name="gspo", options={"clip_low": float("nan")})
    with pytest.raises(ConfigError, match="no option"):
        EstimatorConfig(name="reinforce_pp", options={"clip_low": 0.1})  # it declares none
    assert EstimatorConfig(name="dapo", options={"clip_high": 0.3}).options == {"clip_high": 0.3}
