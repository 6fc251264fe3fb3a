"""On-policy distillation (trainers/distill.py): the advantage against its equation, the teacher's
scores, the refusals (another vocabulary, too little memory) and an iteration that trains on it."""

import json

import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.distill import (DistillConfig, check_teacher_fits, distill_samples, load_teacher,
                                       reverse_kl_advantages)
from agentgym.trainers.samples import Sample


def test_advantage_is_minus_the_reverse_kl_plus_the_weighted_env_advantage():
    student, teacher = np.array([0.0, -1.0, -2.0]), np.array([0.0, -0.5, -3.0])
    env, mask = np.array([0.0, 1.0, 1.0]), np.array([0, 1, 1])
    # -(log p_s - log p_T): -(-1 + 0.5) = 0.5 and -(-2 + 3) = -1; the prompt position stays 0
    np.testing.assert_allclose(reverse_kl_advantages(student, teacher, env, mask, 0.0), [0.0, 0.5, -1.0])
    np.testing.assert_allclose(reverse_kl_advantages(student, teacher, env, mask, 0.5), [0.0, 1.0, -0.5])


def test_distill_samples_replaces_the_advantage_and_drops_tokens_without_signal():
    sample = Sample(input_ids=[1, 2, 3, 4], loss_mask=[0, 1, 1, 1], old_logprobs=[0.0, -1.0, -2.0, -0.7],
                    advantages=[0.0, 0.0, 0.0, 0.0])
    empty = Sample(input_ids=[1, 2], loss_mask=[0, 1], old_logprobs=[0.0, -1.0], advantages=[0.0, 0.0])
    teacher = [np.array([0.0, -0.5, -3.0, -0.7]), np.array([0.0, -1.0])]
    out, metrics = distill_samples([sample, empty], teacher, reward_coef=0.0, drop_abs_adv_below=1e-6)
    assert out == [sample]  # the second agrees with its teacher everywhere: nothing to learn
    assert sample.advantages == pytest.approx([0.0, 0.5, -1.0, 0.0]) and sample.loss_mask == [0, 1, 1, 0]
    assert metrics["reverse_kl_mean"] == pytest.approx((-0.5 + 1.0 + 0.0 + 0.0) / 4)  # over the 4 response tokens
    assert metrics["tokens"] == 4


def test_the_teacher_scores_the_students_tokens(tiny_policy_factory, tiny_model_dir):
    """A teacher that is the student's own model gives every sampled token its logprob: KL 0, A = 0."""
    torch = pytest.importorskip("torch")
    from agentgym.trainers.samples import build_samples
    from agentgym.trajectory import Step, Trajectory

    student = tiny_policy_factory()
    prompt = student.encode_prompt([{"role": "user", "content": "You are in room 1. You see a key."}])
    reply = student.encode_response("take key")
    with torch.no_grad():
        logits = student.model(torch.tensor([prompt + reply])).logits[0].float()
    logp = logits.log_softmax(-1)[len(prompt) - 1:-1].gather(-1, torch.tensor(reply)[:, None])[:, 0]
    step = Step(observation="", anchor="a", text="take key", prompt_ids=prompt, response_ids=reply,
                response_logprobs=logp.tolist())
    samples = build_samples([Trajectory(task_id="t", group_id="g", steps=[step])], [np.array([1.0])])
    teacher = load_teacher(DistillConfig(teacher=str(tiny_model_dir)), student, log=lambda _: None)
    scores = teacher.score(samples, 4)
    np.testing.assert_allclose(scores[0][len(prompt):], logp.numpy(), atol=1e-5)
    out, metrics = distill_samples(samples, scores, reward_coef=0.0)
    assert abs(metrics["reverse_kl_mean"]) < 1e-5
    assert np.abs(np.array(out[0].advantages)).max() < 1e-5


def test_a_teacher_with_another_vocabulary_is_refused_in_one_line(tiny_policy_factory, tmp_path, toy_env_id):
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts

    other = build_tiny_model(tmp_path / "other", env_id=toy_env_id,
                             texts=collect_env_texts(toy_env_id, num_tasks=4, chat={"history": 1}), vocab_size=300,
                             hidden=32, layers=1, heads=2)
    with pytest.raises(ConfigError, match="another vocabulary than the student") as info:
        load_teacher(DistillConfig(teacher=str(other)), tiny_policy_factory(), log=lambda _: None)
    assert "\n" not in str(info.value)


def test_a_teacher_too_large_for_the_memory_left_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"needs about 12.0 GiB on cpu and 4.0 GiB is free") as info:
        check_teacher_fits("big-teacher", 10 * 2**30, 4 * 2**30, "cpu")
    assert "\n" not in str(info.value)
    check_teacher_fits("small-teacher", 2**30, 4 * 2**30, "cpu")  # fits: no error


def test_bad_reward_coef_is_refused(toy_config, tmp_path, tiny_model_dir):
    with pytest.raises(ConfigError, match="distill.reward_coef=-0.5 is out of range"):
        toy_config(tmp_path, tiny_model_dir, "distill.reward_coef=-0.5")


def test_a_distillation_iteration_trains_toward_the_teacher(toy_config, tmp_path, tiny_model_dir, sft_model_dir):
    """The untrained tiny model learns from the SFT model's scores of its own samples: the logged
    reverse KL is positive and the update runs on the teacher's signal."""
    from agentgym.trainers.training import train

    cfg = toy_config(tmp_path, tiny_model_dir, f"distill.teacher={sft_model_dir}", "iterations=2",
                     "checkpoint_every=0", "ppo.drop_abs_adv_below=1e-6")
    train(cfg, log=lambda _: None)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    iterations = [m for m in lines if "distill/reverse_kl_mean" in m]
    assert len(iterations) == 2
    assert all(m["distill/reverse_kl_mean"] > 0 and m["train/samples"] > 0 for m in iterations)
