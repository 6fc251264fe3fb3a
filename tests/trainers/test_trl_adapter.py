"""TRL's own GRPOTrainer trained multi-turn on an agentgym env through AgentGymRollout."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from agentgym.errors import ConfigError

pytest.importorskip("trl")
pytestmark = pytest.mark.timeout(600)
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from .conftest import TOY_ID  # noqa: E402

FULL_CHAT = {"history": "full", "system_prompt": "Act.", "show_admissible": True}


def _config(tmp_path, **overrides):
    from agentgym.integrations.trl import grpo_config

    kwargs = dict(output_dir=str(tmp_path / "trl"), num_generations=2, per_device_train_batch_size=4,
                  gradient_accumulation_steps=1, max_steps=2, learning_rate=1e-3, logging_steps=1, report_to=[],
                  use_cpu=True, max_completion_length=512, temperature=1.0, save_strategy="no", beta=0.0,
                  seed=0, dataloader_num_workers=0, disable_tqdm=True)
    kwargs.update(overrides)
    return grpo_config(**kwargs)


def test_two_trl_grpo_steps_on_our_tokens_and_rewards(tmp_path, toy_env_id, sft_model_dir):
    from agentgym.integrations.trl import AgentGymRollout, grpo_trainer

    rollout = AgentGymRollout(toy_env_id, chat=FULL_CHAT, max_turns=4, max_new_tokens=16)
    outputs = []

    def recording(prompts, trainer):
        out = rollout(prompts, trainer)
        outputs.append((out, list(rollout.last_trajectories)))
        return out

    dataset = rollout.dataset("train", limit=6)
    assert len(dataset) == 6 and dataset[0]["prompt"][-1]["agentgym_task"]
    trainer = grpo_trainer(str(sft_model_dir), rollout, _config(tmp_path, per_device_train_batch_size=8),
                           train_dataset=dataset)
    trainer.rollout_func = recording  # the same hook, recorded
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    assert trainer.state.global_step == 2 and len(outputs) == 2
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "two GRPO steps left every weight unchanged"
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    assert len(rewards) == 2
    for out, trajs in outputs:
        assert len(out["completion_ids"]) == 8 and len(trajs) == 8
        for i, traj in enumerate(trajs):
            # the sequence TRL trains on is made of the ids recorded at generation, turn after turn
            model_tokens = [t for t, m in zip(out["completion_ids"][i], out["env_mask"][i]) if m]
            assert model_tokens == [t for s in traj.steps for t in s.response_ids]
            assert out["prompt_ids"][i] == traj.steps[0].prompt_ids
            assert out["env_reward"][i] == sum(s.reward for s in traj.steps)
            if len(traj.steps) > 1:  # observation tokens between replies are masked out
                assert 0 in out["env_mask"][i]
        # K copies of a prompt are one group: same task, same initial state
        for g in range(0, 8, 2):
            assert trajs[g].group_id == trajs[g + 1].group_id != trajs[(g + 2) % 8].group_id
            assert trajs[g].steps[0].prompt_ids == trajs[g + 1].steps[0].prompt_ids
    assert any(len(t.steps) > 1 for _, trajs in outputs for t in trajs), "no multi-turn episode was played"
    assert any(t.success for _, trajs in outputs for t in trajs)


def test_group_size_one_is_one_clear_line(tmp_path):
    from agentgym.integrations.trl import AgentGymRollout, grpo_config, grpo_trainer

    with pytest.raises(ConfigError, match=r"^GRPO needs a group of at least 2") as err:
        grpo_config(output_dir=str(tmp_path), num_generations=1)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="num_generations=1"):
        grpo_trainer("unused", SimpleNamespace(), SimpleNamespace(num_generations=1), train_dataset=[])
    with pytest.raises(ConfigError, match="history='full'"):
        AgentGymRollout(TOY_ID, chat={"history": 2})


def test_trl_is_handed_the_sampled_ids_with_their_behaviour_logprobs(tmp_path, toy_env_id, tiny_model_dir):
    """Issue 34 for the TRL adapter, on an untrained model whose samples do not survive a decode /
    encode round trip: the ids TRL trains are exactly the sampled ones, env and template tokens
    masked; the logprobs handed to TRL are the engine's behaviour logprobs; and TRL's own scoring of
    those ids gives them back within 1e-5 (the first PPO ratio exp(logp - behaviour) is 1)."""
    from agentgym.integrations.trl import AgentGymRollout, grpo_trainer

    rollout = AgentGymRollout(toy_env_id, chat=FULL_CHAT, max_turns=4, max_new_tokens=12)
    dataset = rollout.dataset("train", limit=3)
    # bf16=False: TRL's default (bf16=True) scores under bf16 autocast, ~1e-3 off the fp32 samples
    trainer = grpo_trainer(str(tiny_model_dir), rollout, _config(tmp_path, per_device_train_batch_size=6, bf16=False),
                           train_dataset=dataset)
    outputs = []

    def recording(prompts, trainer):
        out = rollout(prompts, trainer)
        outputs.append(out)
        return out

    trainer.rollout_func = recording
    inputs = [row for row in dataset for _ in range(2)]  # TRL's sampler repeats a prompt num_generations times
    batch = trainer._generate_and_score_completions(inputs)
    (out,), trajs = outputs, rollout.last_trajectories
    tok = trainer.processing_class
    replies = [s.response_ids for t in trajs for s in t.steps]
    # the point of the test: re-tokenizing a reply's text would not give back the sampled ids
    assert any(tok(tok.decode(r), add_special_tokens=False)["input_ids"] != r for r in replies if r), replies[:6]
    assert any(len(t.steps) > 1 for t in trajs), "no multi-turn episode was played"

    for i, traj in enumerate(trajs):
        prompt, completion = out["prompt_ids"][i], out["completion_ids"][i]
        mask, logprobs = out["env_mask"][i], out["logprobs"][i]
        assert len(completion) == len(mask) == len(logprobs)
        last = traj.steps[-1]
        assert prompt == traj.steps[0].prompt_ids
        assert prompt + completion == last.prompt_ids + last.response_ids  # one sequence, nothing re-tokenized
        trained = set()
        for step in traj.steps:  # each reply sits where it was sampled, with its behaviour logprobs
            span = range(len(step.prompt_ids) - len(prompt), len(step.prompt_ids) - len(prompt) + len(step.response_ids))
            assert [completion[p] for p in span] == step.response_ids
            assert [logprobs[p] for p in span] == step.response_logprobs
            trained.update(span)
        assert [p for p, m in enumerate(mask) if m] == sorted(trained)  # env and template tokens are masked
        # what TRL made of it: the same ids, mask and sampling logprobs, right-padded
        n = len(completion)
        assert batch["completion_ids"][i, :n].tolist() == completion and batch["completion_mask"][i, :n].all()
        assert batch["tool_mask"][i, :n].tolist() == mask
        assert batch["sampling_per_token_logps"][i, :n].tolist() == pytest.approx(logprobs, abs=0)

    # TRL's own scoring of the batch it built (left-padded prompts, right-padded completions)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logp, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention,
                                                                batch["completion_ids"].size(1))
    loss_mask = (batch["completion_mask"] * batch["tool_mask"]).bool()
    assert int(loss_mask.sum()) == sum(len(r) for r in replies)
    worst = float((logp - batch["sampling_per_token_logps"])[loss_mask].abs().max())
    assert worst < 1e-5, f"TRL's logprobs differ from the behaviour logprobs by {worst:.2e}"
