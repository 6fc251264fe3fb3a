"""ppo.rollout_correction (trainers/rollout_correction.py): each mode's weight against hand-computed
values, the mismatch metrics, the loss it feeds, the refusals, and an iteration that logs them."""

import contextlib
import json
import math

import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.rollout_correction import (RolloutCorrectionConfig, correct, require_rollout_logprobs,
                                                  token_weights)
from agentgym.trajectory import Step, Trajectory

# position 0 is a prompt token (mask 0); three response tokens with log w = 0.2, -1.0, 0.0
MASK = np.array([0, 1, 1, 1])
TRAINER = np.array([0.0, -1.0, -2.0, -0.5])
ROLLOUT = np.array([0.0, -1.2, -1.0, -0.5])
W = [math.exp(0.2), math.exp(-1.0), 1.0]  # 1.2214, 0.3679, 1


def _applied(**kwargs):
    return token_weights(RolloutCorrectionConfig(**kwargs), MASK, TRAINER, ROLLOUT)[1]


@pytest.mark.parametrize("kwargs, expected", [
    (dict(mode="none"), [1.0, 1.0, 1.0, 1.0]),
    (dict(mode="tis", cap=1.1), [1.0, 1.1, W[1], 1.0]),  # 1.2214 truncated at 1.1
    (dict(mode="tis", cap=2.0), [1.0, W[0], W[1], 1.0]),
    (dict(mode="mis", low=0.5, high=1.1), [1.0, 0.0, 0.0, 1.0]),  # 1.22 above, 0.37 below the band
    (dict(mode="mis"), [1.0, W[0], W[1], 1.0]),  # the default band [0, 2] holds all three
    (dict(mode="icepop"), [1.0, W[0], 0.0, 1.0]),  # [0.5, 5]: 0.37 masked, the others keep their weight
    (dict(mode="tis", level="sequence"), [1.0] + [math.exp(-0.8)] * 3),  # product 0.4493 < C
    (dict(mode="mis", level="sequence", low=0.5, high=2.0), [1.0, 0.0, 0.0, 0.0]),  # 0.4493 < 0.5: all masked
    (dict(mode="mis", level="sequence", low=0.4, high=2.0), [1.0] + [math.exp(-0.8)] * 3),
])
def test_weights_against_hand_computed_values(kwargs, expected):
    np.testing.assert_allclose(_applied(**kwargs), expected, rtol=1e-12)


def test_mismatch_metrics_against_hand_computed_values():
    out = correct(RolloutCorrectionConfig(mode="icepop"), [MASK], [TRAINER], [ROLLOUT])
    m = out.metrics
    # k3 = w - 1 - log w per token: 0.021403, 0.367879, 0
    assert m["kl_mean"] == pytest.approx((0.02140276 + 0.36787944) / 3, rel=1e-6)
    assert m["kl_max"] == pytest.approx(0.36787944, rel=1e-6)
    assert m["ess"] == pytest.approx(0.85065018, rel=1e-6)  # (sum w)^2 / (3 sum w^2)
    assert m["masked_frac"] == pytest.approx(1 / 3) and m["clipped_frac"] == 0.0
    assert m["weight_mean"] == pytest.approx((W[0] + 0 + 1) / 3) and m["tokens"] == 3
    tis = correct(RolloutCorrectionConfig(mode="tis", cap=1.1), [MASK], [TRAINER], [ROLLOUT]).metrics
    assert tis["clipped_frac"] == pytest.approx(1 / 3) and tis["masked_frac"] == 0.0


def test_engine_and_trainer_that_agree_give_weight_one_and_no_mismatch():
    m = correct(RolloutCorrectionConfig(mode="tis"), [MASK], [TRAINER], [TRAINER]).metrics
    assert m["kl_mean"] == 0.0 and m["kl_max"] == 0.0 and m["ess"] == pytest.approx(1.0) and m["weight_mean"] == 1.0


def test_sequence_weights_stay_finite_far_off_policy():
    """A long sample's product of ratios overflows exp(); the weight saturates instead of inf / nan."""
    n = 2000
    mask, trainer, rollout = np.ones(n), np.zeros(n), np.full(n, -1.0)  # log W = 2000
    cfg = RolloutCorrectionConfig(mode="tis", level="sequence")
    assert np.all(token_weights(cfg, mask, trainer, rollout)[1] == 2.0)
    m = correct(cfg, [mask, mask], [trainer, trainer], [rollout, np.zeros(n)]).metrics
    assert all(np.isfinite(v) for v in m.values()) and m["ess"] == pytest.approx(0.5)


def test_scaled_advantage_is_the_weighted_token_loss():
    """A' = w~ A through PPO-clip equals w~ times each token's clipped term (w~ >= 0 is homogeneous)."""
    torch = pytest.importorskip("torch")
    from agentgym.trainers.ppo import ppo_clip_loss

    logp = torch.tensor([[-0.9, -2.3, -0.4]])
    old = torch.tensor([[-1.0, -2.0, -0.5]])
    adv, mask, w = torch.tensor([[1.0, -1.0, 2.0]]), torch.ones(1, 3), torch.tensor([[2.0, 0.0, 0.5]])
    ratio = torch.exp(logp - old)
    per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
    loss, _ = ppo_clip_loss(logp, old, adv * w, mask, 0.8, 1.2, "token-sum", denom=1.0)
    assert float(loss) == pytest.approx(float((w * per_token).sum()), rel=1e-6)


@pytest.mark.parametrize("overrides, says", [
    (["ppo.rollout_correction.mode=tis", "ppo.rollout_correction.cap=0.5"], "cap=0.5 is out of range"),
    (["ppo.rollout_correction.mode=mis", "ppo.rollout_correction.low=1.5"], "must hold 1"),
    (["ppo.rollout_correction.mode=icepop", "ppo.rollout_correction.high=0.9"], "must hold 1"),
    (["ppo.rollout_correction.mode=icepop", "ppo.rollout_correction.level=sequence"], "level=token"),
    (["ppo.rollout_correction.mode=tis", "ppo.rollout_correction.high=3"], "band of mis and icepop"),
    (["ppo.rollout_correction.mode=tas"], "choose one of none, tis, mis, icepop"),
    (["ppo.rollout_correction.mode=tis", "rollout.max_staleness=1"], "own correction"),
    (["ppo.rollout_correction.mode=tis", "distill.teacher=x"], "do not combine yet"),
])
def test_bad_settings_are_refused_in_one_line(toy_config, tmp_path, tiny_model_dir, overrides, says):
    with pytest.raises(ConfigError, match=says) as info:
        toy_config(tmp_path, tiny_model_dir, *overrides)
    assert "\n" not in str(info.value)


def test_missing_rollout_logprobs_are_refused_in_one_line():
    step = Step(observation="", anchor="a", text="go", prompt_ids=[1, 2], response_ids=[3], response_logprobs=None)
    traj = Trajectory(task_id="t", group_id="g", steps=[step])
    with pytest.raises(ConfigError, match="policy.engine=custom recorded none") as info:
        require_rollout_logprobs(RolloutCorrectionConfig(mode="tis"), [traj], "custom")
    assert "\n" not in str(info.value)
    step.response_logprobs = [-0.1]
    require_rollout_logprobs(RolloutCorrectionConfig(mode="tis"), [traj], "custom")


def test_an_iteration_logs_the_mismatch_and_trains_against_the_trainer(toy_config, tmp_path, sft_model_dir):
    """With a correction on, every iteration logs mismatch/*; the HF engine is the trainer, so the
    two agree up to batching numerics, the first minibatch's ratio is 1 and the weights are ~1."""
    from agentgym.trainers.training import train

    cfg = toy_config(tmp_path, sft_model_dir, "ppo.rollout_correction.mode=tis", "iterations=2", "checkpoint_every=0")
    train(cfg, log=lambda _: None)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    iterations = [m for m in lines if "rollout/success_rate" in m]
    assert len(iterations) == 2
    for m in iterations:
        assert {"mismatch/kl_mean", "mismatch/kl_max", "mismatch/ess", "mismatch/masked_frac",
                "mismatch/clipped_frac"} <= set(m)
        assert 0 <= m["mismatch/kl_max"] < 1e-4 and m["mismatch/ess"] > 0.999
        assert m["train/ratio_max_first_minibatch"] == pytest.approx(1.0, abs=1e-3)


def _iterations(run_dir):
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [m for m in lines if "rollout/success_rate" in m]


MISMATCH_KEYS = {"mismatch/kl_mean", "mismatch/kl_max", "mismatch/ess", "mismatch/tokens"}


def test_every_iteration_logs_the_mismatch_by_default(toy_config, tmp_path, sft_model_dir):
    """No correction asked: the update's first optimizer step measures the mismatch (its logprobs are
    the trainer's before any weight moves). The HF engine is the trainer: they agree up to numerics.
    ppo.rollout_correction.measure=false turns it off."""
    from agentgym.trainers.training import train

    train(toy_config(tmp_path, sft_model_dir, "iterations=2", "checkpoint_every=0", "ppo.minibatch_size=4"),
          log=lambda _: None)
    iterations = _iterations(tmp_path / "run")
    assert len(iterations) == 2
    for m in iterations:
        assert MISMATCH_KEYS <= set(m) and m["train/optimizer_steps"] > 1
        assert 0 <= m["mismatch/kl_max"] < 1e-4 and m["mismatch/ess"] > 0.999
        assert 0 < m["mismatch/tokens"] < m["rollout/response_tokens"]  # the first of several minibatches
    train(toy_config(tmp_path, sft_model_dir, "iterations=1", "checkpoint_every=0",
                     "ppo.rollout_correction.measure=false"), overwrite=True, log=lambda _: None)
    assert not any(k.startswith("mismatch/") for k in _iterations(tmp_path / "run")[0])


@contextlib.contextmanager
def engine_recording(name: str, rewrite):
    """policy.engine=NAME: the trainer's own HF engine whose recorded logprobs of each reply are
    `rewrite(logprobs)` (a list, or None for an engine that records none)."""
    from agentgym.policies import engines

    class Rewritten:
        def __init__(self, trainer):
            self.trainer = trainer

        def __getattr__(self, attr):
            return getattr(self.trainer, attr)

        def generate(self, prompts, sampling=None, contexts=None):
            return self.generate_ids([self.trainer.encode_prompt(m) for m in prompts], sampling)

        def generate_ids(self, prompt_ids, sampling=None, **kwargs):
            out = self.trainer.generate_ids(prompt_ids, sampling, **kwargs)
            for c in out:
                c.response_logprobs = rewrite(c.response_logprobs)
            return out

    engines.register_engine(name, lambda trainer, _path, _settings: Rewritten(trainer))
    try:
        yield
    finally:
        engines._ENGINES.pop(name, None)


def test_the_measured_mismatch_is_the_engines_against_the_trainers(toy_config, tmp_path, sft_model_dir):
    """An engine whose recorded logprobs are off by log 2 on every token (it reports probabilities
    twice the trainer's): the first step measures w = 1/2 on each, k3 = 1/2 - 1 + log 2."""
    from agentgym.trainers.training import train

    with engine_recording("shifted", lambda logprobs: [lp + math.log(2) for lp in logprobs]):
        train(toy_config(tmp_path, sft_model_dir, "iterations=1", "checkpoint_every=0", "policy.engine=shifted"),
              log=lambda _: None)
    m = _iterations(tmp_path / "run")[0]
    assert m["mismatch/kl_mean"] == pytest.approx(0.5 - 1 + math.log(2), abs=1e-4)
    assert m["mismatch/kl_max"] == pytest.approx(0.5 - 1 + math.log(2), abs=1e-4)


def test_an_engine_without_logprobs_leaves_the_metrics_out_and_says_so_once(toy_config, tmp_path, sft_model_dir):
    from agentgym.trainers.training import train

    lines: list[str] = []
    with engine_recording("no-logprobs", lambda logprobs: None):
        train(toy_config(tmp_path, sft_model_dir, "iterations=2", "checkpoint_every=0", "policy.engine=no-logprobs"),
              log=lines.append)
        iterations = _iterations(tmp_path / "run")
        assert len(iterations) == 2 and not any(k.startswith("mismatch/") for m in iterations for k in m)
        said = [x for x in lines if "mismatch/* not logged" in x]
        assert len(said) == 1 and "policy.engine=no-logprobs" in said[0]
        with pytest.raises(ConfigError, match="policy.engine=no-logprobs recorded none"):
            train(toy_config(tmp_path, sft_model_dir, "iterations=1", "checkpoint_every=0",
                             "policy.engine=no-logprobs", "ppo.rollout_correction.mode=tis"),
                  overwrite=True, log=lambda _: None)
