"""The PPO update moves probabilities the way the advantages say; LoRA adapters and the
adapter-disabled reference; samples built from recorded token ids."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentgym.errors import ConfigError  # noqa: E402
from agentgym.policies.base import SamplingParams  # noqa: E402
from agentgym.trajectory import Step  # noqa: E402

PROMPT = [{"role": "user", "content": "You are in room 1. You see a key. Take the key in room 1."}]


def _sample_for(policy, text, advantage):
    from agentgym.trainers.samples import build_samples
    from agentgym.trajectory import Trajectory

    prompt_ids, response_ids = policy.encode_prompt(PROMPT), policy.encode_response(text)
    traj = Trajectory(task_id="t", group_id="g", steps=[Step(observation="", anchor="a", text=text,
                                                             prompt_ids=prompt_ids, response_ids=response_ids)])
    return build_samples([traj], [np.array([advantage])])


def _logprob(policy, text):
    ids = policy.encode_prompt(PROMPT)
    resp = policy.encode_response(text)
    full = torch.tensor([ids + resp])
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(full).logits[0, :-1].float(), -1).gather(-1, full[0, 1:, None])[:, 0]
    return float(logp[len(ids) - 1:].sum())


def _update(policy, samples, cfg, steps=3):
    from agentgym.trainers.training import ppo_update, score_sequences, update_clip
    from agentgym.trainers.run_setup import make_optimizer

    for s, (logp, _) in zip(samples, score_sequences(policy, samples, 8, want_hidden=False)):
        s.old_logprobs = [0.0] + logp.tolist()  # on-policy behaviour logprobs
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, {})
    stats = None
    for i in range(steps):
        stats = ppo_update(cfg.ppo, update_clip(cfg.ppo, cfg.estimator.name), policy, optimizer, scheduler, samples,
                           np.random.default_rng(i), i)
    return stats


@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_advantage_sign_moves_the_action_probability(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir,
                                                     advantage):
    policy = tiny_policy_factory()
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-3", "ppo.clip_eps=0.2")
    text = "<action>take key</action>"
    before = _logprob(policy, text)
    stats = _update(policy, _sample_for(policy, text, advantage), cfg)
    after = _logprob(policy, text)
    assert (after - before) * advantage > 0.05, (before, after)
    assert stats["optimizer_steps"] == 1 and np.isfinite(stats["pg_loss"])


def test_zero_advantage_leaves_the_policy_unchanged(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir):
    policy = tiny_policy_factory()
    cfg = toy_config(tmp_path, tiny_model_dir)
    before = [p.detach().clone() for p in policy.model.parameters()]
    _update(policy, _sample_for(policy, "<action>go left</action>", 0.0), cfg, steps=1)
    assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))


def _response_entropy(policy, text):
    from agentgym.trainers.ppo import token_logprobs

    ids, resp = policy.encode_prompt(PROMPT), policy.encode_response(text)
    full = torch.tensor([ids + resp])
    with torch.no_grad():
        _, _, entropy = token_logprobs(policy.model, full, torch.ones_like(full), want_entropy=True)
    return float(entropy[0, len(ids) - 1:].mean())


def test_an_entropy_bonus_alone_flattens_the_response_distribution(tiny_policy_factory, toy_config, tmp_path,
                                                                   tiny_model_dir):
    # Zero advantage: without the bonus nothing moves (test above); with it the policy's entropy at
    # the response tokens rises and the update reports it.
    policy = tiny_policy_factory()
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-3", "ppo.entropy_coef=0.1")
    text = "<action>take key</action>"
    before = _response_entropy(policy, text)
    stats = _update(policy, _sample_for(policy, text, 1e-3), cfg)
    assert _response_entropy(policy, text) > before + 0.01
    assert stats["entropy"] > 0
    with pytest.raises(ConfigError, match="entropy_coef"):
        toy_config(tmp_path, tiny_model_dir, "ppo.entropy_coef=-1")


def test_non_finite_advantage_stops_training(tiny_policy_factory, toy_config, tmp_path, tiny_model_dir):
    from agentgym.trainers.training import TrainingDiverged

    policy = tiny_policy_factory()
    cfg = toy_config(tmp_path, tiny_model_dir)
    with pytest.raises(TrainingDiverged, match="iteration 0: non-finite loss"):
        _update(policy, _sample_for(policy, "<action>go left</action>", float("nan")), cfg, steps=1)


def test_lora_adapter_saves_in_peft_format_and_reference_is_the_base(tiny_policy_factory, toy_config, tmp_path,
                                                                     tiny_model_dir):
    from agentgym.policies.hf import HFPolicy

    policy = tiny_policy_factory(lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj", "o_proj"]})
    base = tiny_policy_factory()
    cfg = toy_config(tmp_path, tiny_model_dir, "policy.lora={}")
    text = "<action>take key</action>"
    samples = _sample_for(policy, text, 1.0)
    ids = torch.tensor([samples[0].input_ids])

    def logits(p, ref=False):
        with torch.no_grad():
            return (p.reference_forward(input_ids=ids) if ref else p.model(input_ids=ids)).logits

    torch.testing.assert_close(logits(policy), logits(base))  # LoRA B starts at zero
    _update(policy, samples, cfg)
    assert not torch.allclose(logits(policy), logits(policy, ref=True))
    torch.testing.assert_close(logits(policy, ref=True), logits(base))  # adapter disabled = the base model
    n_trainable = sum(p.numel() for p in policy.trainable_parameters())
    assert 0 < n_trainable < sum(p.numel() for p in policy.model.parameters()) / 5

    policy.save(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    assert not (tmp_path / "adapter" / "model.safetensors").exists()  # only the adapter, no second copy
    reloaded = HFPolicy(tmp_path / "adapter")
    torch.testing.assert_close(logits(reloaded), logits(policy))


def test_kl_term_needs_a_reference(toy_config, tmp_path, tiny_model_dir):
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match="reference"):
        toy_config(tmp_path, tiny_model_dir, "ppo.kl_coef=0.1")


class _TokenizedOracle:
    """The oracle's replies with the token ids a model writing them canonically would produce."""

    def __init__(self, policy, space):
        from agentgym.policies.scripted import OraclePolicy

        self.policy, self.oracle = policy, OraclePolicy(space)

    def generate(self, prompts, sampling=None, contexts=None):
        out = self.oracle.generate(prompts, sampling, contexts)
        for comp, messages in zip(out, prompts):
            comp.prompt_ids = self.policy.encode_prompt(messages)
            comp.response_ids = self.policy.encode_response(comp.text)
            comp.response_logprobs = [-0.5] * len(comp.response_ids)
        return out


def _check_spans(samples, trajs):
    for sample in samples:
        assert sample.num_loss_tokens == sum(len(trajs[i].steps[t].response_ids) for i, t in sample.step_refs)
        for k, (i, t) in enumerate(sample.step_refs):
            step = trajs[i].steps[t]
            span = range(sample.value_positions[k] + 1, sample.response_ends[k] + 1)
            assert sample.input_ids[: len(step.prompt_ids)] == step.prompt_ids  # exact context of the step
            assert [sample.input_ids[p] for p in span] == step.response_ids
            assert [sample.old_logprobs[p] for p in span] == step.response_logprobs
            assert all(sample.loss_mask[p] for p in span)


@pytest.mark.parametrize("scripted", [True, False])
def test_full_conversation_samples_mask_env_tokens(tiny_policy_factory, toy_env_id, scripted):
    from agentgym.registration import get_task_space
    from agentgym.rollout import collect
    from agentgym.trainers.samples import tokenize_trajectories

    policy = tiny_policy_factory()
    space = get_task_space(toy_env_id)
    actor = _TokenizedOracle(policy, space) if scripted else policy
    trajs = collect(toy_env_id, space.split("train")[:2], actor, 2, sampling=SamplingParams(max_new_tokens=5, seed=0),
                    chat={"history": "full", "system_prompt": "Act."}, max_turns=3)
    per_step = tokenize_trajectories(trajs, "per-step")
    full = tokenize_trajectories(trajs, "full")
    assert len(per_step) == sum(len(t.steps) for t in trajs)
    _check_spans(per_step, trajs)
    _check_spans(full, trajs)
    if scripted:  # canonical replies: the template only appends, so every episode is one sequence
        assert len(full) == len(trajs)
        assert sum(s.num_loss_tokens for s in full) == sum(s.num_loss_tokens for s in per_step)
    else:  # a random model's replies may re-tokenize differently in later prompts: new sequence there
        assert len(trajs) <= len(full) <= len(per_step)


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "loop", "gigpo", "ppo", "spa"])
def test_every_estimator_runs_an_iteration(estimator, tiny_policy_factory, toy_config, tmp_path, tiny_model_dir):
    """One RL iteration per estimator through the real loop: PPO trains its value head on GAE
    returns, SPA fits its progress head; every advantage and loss is finite."""
    from agentgym.trainers.training import run_iteration
    from agentgym.trainers.run_setup import build_heads, make_optimizer
    from agentgym.trainers.task_selection import select_train_tasks
    from agentgym.registration import get_task_space

    cfg = toy_config(tmp_path, tiny_model_dir, f"estimator.name={estimator}", "estimator.invalid_penalty=0.1",
                     "rollout.max_new_tokens=4")
    policy = tiny_policy_factory()
    heads = build_heads(cfg.estimator, policy)
    assert ("value" in heads) == (estimator == "ppo") and ("progress" in heads) == (estimator == "spa")
    before = {k: [p.detach().clone() for p in h.parameters()] for k, h in heads.items()}
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    from agentgym.tasks.source import make_task_source

    space = get_task_space(cfg.env.id)
    source = make_task_source("split", space, select_train_tasks(cfg.env, space, cfg.seed), seed=0)
    from agentgym.trainers.batches import BatchProducer

    m = run_iteration(cfg, 0, policy, optimizer, scheduler, BatchProducer(cfg, policy, source), heads)
    assert m["rollout"]["episodes"] == 4 and np.isfinite(m["adv"]["mean"])
    if estimator in ("gigpo", "ppo", "spa"):  # per-step credit: the invalid-action penalty differs by step
        assert m["adv"]["nonzero_frac"] > 0
    assert np.isfinite(m["train"]["pg_loss"]) and m["train"]["optimizer_steps"] >= 1
    if estimator == "ppo":
        assert m["train"]["value_loss"] > 0
    for name, params in before.items():  # the value head learns / the progress head was fit
        assert any(not torch.equal(a, b) for a, b in zip(params, heads[name].parameters()))


def test_update_logs_each_minibatch_ratio_and_the_first_is_one(tiny_policy_factory, toy_config, tmp_path,
                                                               tiny_model_dir):
    policy = tiny_policy_factory()
    cfg = toy_config(tmp_path, tiny_model_dir, "ppo.lr=1e-2", "ppo.minibatch_size=2", "ppo.micro_batch_size=1")
    samples = [s for text, adv in [("<action>take key</action>", 1.0), ("<action>go north</action>", -1.0),
                                   ("<action>look</action>", 1.0)]
               for s in _sample_for(policy, text, adv)]
    stats = _update(policy, samples, cfg, steps=1)
    per_minibatch = stats["ratio_max_per_minibatch"]
    assert stats["optimizer_steps"] == 2 and len(per_minibatch) == 2  # 3 samples in minibatches of 2 and 1
    assert abs(per_minibatch["0"] - 1.0) < 1e-5 and stats["ratio_max_first_minibatch"] == per_minibatch["0"]
    assert per_minibatch["1"] != pytest.approx(1.0, abs=1e-4)  # the second step sees weights the first moved
