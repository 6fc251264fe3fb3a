"""The update uses the loss each estimator declares (trainers/policy_losses.py through
learner.ppo_update(estimator=...)): every new loss moves the action's probability the way the
advantage says; the PPO family's update is unchanged bit for bit; DAPO drops all-zero samples."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentgym.trainers.estimators import EstimatorConfig  # noqa: E402
from agentgym.trajectory import Step, Trajectory  # noqa: E402

PROMPT = [{"role": "user", "content": "You are in room 1. You see a key. Take the key in room 1."}]
TEXT = "<action>take key</action>"


def _samples(policy, advantages):
    from agentgym.trainers.samples import build_samples

    prompt_ids, response_ids = policy.encode_prompt(PROMPT), policy.encode_response(TEXT)
    trajs = [Trajectory(task_id="t", group_id="g", steps=[Step(observation="", anchor="a", text=TEXT,
                                                               prompt_ids=prompt_ids, response_ids=response_ids)])
             for _ in advantages]
    return build_samples(trajs, [np.array([a]) for a in advantages])


def _logprob(policy):
    ids, resp = policy.encode_prompt(PROMPT), policy.encode_response(TEXT)
    full = torch.tensor([ids + resp])
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(full).logits[0, :-1].float(), -1).gather(-1, full[0, 1:, None])[:, 0]
    return float(logp[len(ids) - 1:].sum())


def _update(policy, cfg, samples, estimator, steps=3):
    from agentgym.trainers.learner import ppo_update, score_sequences
    from agentgym.trainers.training import update_clip
    from agentgym.trainers.run_setup import make_optimizer

    for s, (logp, _) in zip(samples, score_sequences(policy, samples, 8, want_hidden=False)):
        s.old_logprobs = [0.0] + logp.tolist()
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, {})
    stats = None
    for i in range(steps):
        stats = ppo_update(cfg.ppo, update_clip(cfg.ppo, cfg.estimator.name), policy, optimizer, scheduler, samples,
                           np.random.default_rng(i), i, estimator=estimator)
    return stats


@pytest.mark.parametrize("name", ["dapo", "dr_grpo", "gspo", "reinforce_pp", "cispo"])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_each_declared_loss_follows_the_advantage(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir,
                                                  name, advantage):
    policy = tiny_policy_factory()
    opts = {"clip_low": 0.2, "clip_high": 0.2} if name == "gspo" else {}  # the paper's 4e-4 barely moves in 3 steps
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-3", "ppo.kl_coef=0.0")
    before = _logprob(policy)
    stats = _update(policy, cfg, _samples(policy, [advantage]), EstimatorConfig(name=name, options=opts))
    assert (_logprob(policy) - before) * advantage > 0.02
    assert np.isfinite(stats["pg_loss"]) and stats["optimizer_steps"] == 1


def test_ppo_family_update_is_unchanged(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir):
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-3")
    params = []
    for estimator in (None, EstimatorConfig(name="gigpo")):
        torch.manual_seed(0)
        policy = tiny_policy_factory()
        _update(policy, cfg, _samples(policy, [1.0, -0.5]), estimator, steps=2)
        params.append([p.detach().clone() for p in policy.model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*params))


def test_dapo_dynamic_sampling_drops_all_zero_samples(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir):
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-3", "ppo.minibatch_size=1")
    policy = tiny_policy_factory()
    stats = _update(policy, cfg, _samples(policy, [0.0, 0.0, 1.0]), EstimatorConfig(name="dapo"), steps=1)
    assert stats["optimizer_steps"] == 1  # one sample left of three
    stats = _update(policy, cfg, _samples(policy, [0.0, 0.0, 1.0]), EstimatorConfig(name="grpo"), steps=1)
    assert stats["optimizer_steps"] == 3


def test_dr_grpo_divides_by_its_constant_not_the_length(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir):
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-3")
    policy = tiny_policy_factory()
    samples = _samples(policy, [1.0])
    n = samples[0].num_loss_tokens
    stats = _update(policy, cfg, samples, EstimatorConfig(name="dr_grpo", options={"norm_tokens": 100}), steps=1)
    assert stats["pg_loss"] == pytest.approx(-n / 100, rel=1e-4)  # ratio 1 on the first step: -sum A / 100
    stats = _update(policy, cfg, _samples(policy, [1.0]), None, steps=1)
    assert stats["pg_loss"] == pytest.approx(-1.0, rel=1e-4)  # token-mean
