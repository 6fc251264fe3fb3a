"""Admissible-only decoding (`SamplingParams.admissible_only`, `rollout.admissible_only`): an
untrained tiny model, which writes garbage when free, replies only with admissible actions when
constrained; the policy is the model renormalized over the ids the trie allowed at each token, in
the recorded logprobs and in the update alike (the first PPO ratio is 1); engines, envs and
configs that cannot do it are refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from agentgym.errors import ConfigError
from agentgym.policies.base import SamplingParams

from tests.trainers.conftest import SHORT_CHAT
from tests.trainers.test_token_in_token_out import FULL_CHAT, check_one_sequence_per_episode

ACTIONS = {"go left", "go right", "take key"}


def _play(policy, env_id, chat, admissible_only, **options):
    import agentgym

    tasks = agentgym.get_task_space(env_id).split("train")[:4]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=3, admissible_only=admissible_only)
    return agentgym.collect(env_id, tasks, policy, 3, seed=7, chat=chat, max_turns=5, sampling=sampling, **options)


@pytest.mark.parametrize("chat", [SHORT_CHAT, FULL_CHAT], ids=["windowed", "full"])
def test_replies_are_admissible_actions_only_when_asked(chat, toy_env_id, tiny_policy_factory):
    policy = tiny_policy_factory()
    free = _play(policy, toy_env_id, chat, False)
    assert any(s.action not in ACTIONS for t in free for s in t.steps)  # the untrained model's garbage
    constrained = _play(policy, toy_env_id, chat, True)
    steps = [s for t in constrained for s in t.steps]
    # every reply is an admissible action in the env's format (this corridor lists "go left" in room 0,
    # where it then fails: admissible is what the env lists)
    assert steps and all(s.text == f"<action>{s.action}</action>" and s.action in ACTIONS for s in steps)
    eos = policy.tokenizer.eos_token_id
    assert all(s.response_ids == policy.encode_response(s.text) and s.response_ids[-1] == eos for s in steps)
    # recorded logprobs: the model renormalized over the ids allowed at each token (by hand here)
    for s in steps[:6]:
        assert len(s.response_allowed) == len(s.response_ids)
        with torch.no_grad():
            logits = policy.model(torch.tensor([s.prompt_ids + s.response_ids])).logits[0].float()
        raw = torch.log_softmax(logits[len(s.prompt_ids) - 1:-1], -1)
        for k, (token, ids) in enumerate(zip(s.response_ids, s.response_allowed)):
            assert token in ids
            expected = raw[k, token] - torch.logsumexp(raw[k, ids], 0)
            assert abs(float(expected) - s.response_logprobs[k]) < 1e-5
            assert float(raw[k, token]) < s.response_logprobs[k] + 1e-6  # renormalized: never below the raw one
    # the update scores them the same way: ratio 1 within 1e-5, and 1e-3 off or more without the renormalization
    if chat is FULL_CHAT:
        check_one_sequence_per_episode(constrained, policy, replies_drift=False)  # one sequence per episode
    assert _worst_ratio_error(policy, constrained, "full" if chat is FULL_CHAT else "per-step") < 1e-5
    for t in constrained:
        for s in t.steps:
            s.response_allowed = None
    assert _worst_ratio_error(policy, constrained, "per-step") > 1e-3


def _worst_ratio_error(policy, trajectories, mode: str) -> float:
    from agentgym.trainers.learner import score_sequences
    from agentgym.trainers.samples import tokenize_trajectories

    sequences = tokenize_trajectories(trajectories, mode)
    worst = 0.0
    for seq, (logp, _) in zip(sequences, score_sequences(policy, sequences, micro=4, want_hidden=False)):
        mask = torch.tensor(seq.loss_mask[1:], dtype=torch.bool)
        worst = max(worst, float((logp[mask] - torch.tensor(seq.old_logprobs[1:])[mask]).abs().max()))
    return worst


def test_trie_takes_replies_that_extend_one_another_and_leaves_out_those_too_long(tiny_policy_factory):
    policy = tiny_policy_factory()
    eos = policy.tokenizer.eos_token_id
    short, longer, too_long = [11, eos], [11, 12, 13, eos], [20] * 20 + [eos]
    prompts = [policy.encode_prompt([{"role": "user", "content": "You are in room 1."}])] * 24
    out = policy.generate_ids(prompts, SamplingParams(temperature=1.0, max_new_tokens=8, seed=0),
                              allowed_replies=[[short, longer, too_long]] * 12 + [None] * 12)
    replies = [c.response_ids for c in out]
    assert {tuple(r) for r in replies[:12]} == {tuple(short), tuple(longer)}  # both, never the one that cannot fit
    assert any(tuple(r) not in {tuple(short), tuple(longer)} for r in replies[12:])  # None: free decoding
    greedy = policy.generate_ids(prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=8),
                                 allowed_replies=[[too_long]])[0]
    assert greedy.response_ids == too_long[:8] and greedy.finish_reason == "length"  # nothing fits: cut as any reply


def test_engines_and_envs_that_cannot_are_refused_in_one_line(toy_env_id, tiny_policy_factory):
    from agentgym.policies.scripted import RandomPolicy

    with pytest.raises(ConfigError, match="admissible_only decoding needs an engine .* RandomPolicy cannot"):
        _play(RandomPolicy(), toy_env_id, SHORT_CHAT, True)

    import agentgym
    from agentgym.rollout import collect

    tasks = agentgym.get_task_space("agentgym/ToolUse-v0").split("train")[:1]
    with pytest.raises(ConfigError, match="lists no admissible actions .* set rollout.admissible_only=false") as err:
        collect("agentgym/ToolUse-v0", tasks, tiny_policy_factory(), 1, max_turns=1, chat={"history": 1},
                sampling=SamplingParams(max_new_tokens=4, admissible_only=True))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("overrides, message", [
    (["rollout.admissible_only=true", "policy.engine=vllm"], "policy.engine=vllm cannot: use policy.engine=hf"),
    (["rollout.admissible_only=maybe"], "admissible_only"),
])
def test_config_refuses_admissible_only_where_it_cannot_run(overrides, message, toy_config, tmp_path, tiny_model_dir):
    from agentgym.trainers.checks import validate_config

    with pytest.raises(ConfigError, match=message):
        validate_config(toy_config(tmp_path, tiny_model_dir, *overrides))


def test_training_and_its_evaluations_decode_admissible_actions_only(toy_config, tmp_path, tiny_model_dir):
    from agentgym.trainers.training import train
    from agentgym.trajectory import load_trajectories

    cfg = toy_config(tmp_path, tiny_model_dir, "rollout.admissible_only=true", "checkpoint_every=0",
                     "log.save_trajectories_every=1")
    metrics: list = []
    summary = train(cfg, log=lambda _: None, on_iteration=metrics.append)
    assert summary["iterations"] == 2
    # the update renormalizes as the sampler did: its first minibatch's ratio is 1
    assert all(abs(m["train"]["ratio_max_first_minibatch"] - 1.0) < 1e-5 for m in metrics if m["train"]["samples"])
    trained = sorted((tmp_path / "run" / "trajectories").glob("train_iter*.jsonl"))
    evaluated = sorted((tmp_path / "run" / "evals").glob("iter*/trajectories.jsonl"))
    assert len(trained) == 2 and len(evaluated) == 2  # both iterations' rollouts, the evaluations before and after
    steps = [s for f in trained + evaluated for t in load_trajectories(f) for s in t.steps]
    assert steps and all(s.action in ACTIONS for s in steps)
    # `agentgym eval RUN_DIR` decodes as the run did, so it reproduces the run's final evaluation
    from typer.testing import CliRunner

    from agentgym.cli import app

    result = CliRunner().invoke(app, ["eval", str(tmp_path / "run"), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "again" / "report.json").read_text())["overall"]
    final = json.loads((tmp_path / "run" / "evals" / "iter00002" / "report.json").read_text())["overall"]
    assert again["success_rate"] == final["success_rate"] and again["invalid_action_rate"] == final["invalid_action_rate"]
    assert all(s.action in ACTIONS for t in load_trajectories(tmp_path / "again" / "trajectories.jsonl") for s in t.steps)


def test_renormalized_logprobs_are_the_same_at_loss_positions_and_over_the_whole_sequence(tiny_policy_factory):
    """token_logprobs' two paths (LM head at the loss positions alone, or everywhere) renormalize
    over the allowed ids alike, entropy too; rows without allowed ids are left as they were."""
    from agentgym.trainers.ppo import token_logprobs

    policy = tiny_policy_factory()
    ids = torch.tensor([[5, 9, 17, 33, 41, 2]])
    mask = torch.ones_like(ids)
    allowed = torch.full((1, 5, 3), -1)
    allowed[0, 2] = torch.tensor([33, 40, 50])  # token 3 (33) drawn among three ids
    allowed[0, 3, :2] = torch.tensor([41, 7])
    positions = torch.tensor([[False, True, True, True, True]])
    with torch.no_grad():
        free = token_logprobs(policy.model, ids, mask, want_entropy=True, positions=positions)
        at_loss = token_logprobs(policy.model, ids, mask, want_entropy=True, positions=positions, allowed=allowed)
        whole = token_logprobs(policy.model, ids, mask, want_entropy=True, allowed=allowed)
        logits = policy.model(ids).logits[0, :-1].float()
    raw = torch.log_softmax(logits, -1)
    expected = raw[2, 33] - torch.logsumexp(raw[2, [33, 40, 50]], 0)
    assert abs(float(at_loss[0][0, 2] - expected)) < 1e-5 and abs(float(whole[0][0, 2] - expected)) < 1e-5
    q = torch.softmax(logits[3, [41, 7]], 0)
    assert abs(float(at_loss[2][0, 3] + (q * q.log()).sum())) < 1e-5
    assert torch.allclose(at_loss[0][positions], whole[0][positions], atol=1e-5)
    assert torch.allclose(at_loss[0][0, [1, 4]], free[0][0, [1, 4]])  # free rows as they were
    assert float(at_loss[0][0, 2]) > float(free[0][0, 2])


@pytest.mark.parametrize("allowed", [[[3]], [[]], [[9, 3], [1]], "x"], ids=["token-not-in-ids", "empty", "length", "type"])
def test_a_trajectory_whose_allowed_ids_do_not_fit_its_tokens_is_one_line(allowed):
    from agentgym.trainers.samples import tokenize_trajectories
    from agentgym.trajectory import Step, Trajectory

    step = Step(observation="o", anchor="a", prompt_ids=[1, 2], response_ids=[9], response_logprobs=[-0.1],
                response_allowed=allowed)
    with pytest.raises(ValueError, match="response_allowed must give") as err:
        tokenize_trajectories([Trajectory(task_id="t", group_id="g", steps=[step])])
    assert "\n" not in str(err.value)
