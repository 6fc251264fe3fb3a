"""benchmarks/learning/rollout_correction.py: its bf16 engine samples from bf16 weights that follow
the trainer's, its summary pairs the arms per seed, and a results file is not extended with runs of
other settings."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
rc = pytest.importorskip("benchmarks.learning.rollout_correction")


def test_bf16_engine_samples_in_bf16_and_follows_the_trainer(tiny_policy_factory):
    import torch

    from agentgym.policies.base import SamplingParams

    trainer = tiny_policy_factory()
    engine = rc.Bf16Rollouts(trainer)
    prompt = trainer.encode_prompt([{"role": "user", "content": "You are in room 0."}])

    def logprobs(model, c):  # the model's logprobs of the sampled tokens, recomputed in one forward
        ids = torch.tensor([list(c.prompt_ids) + list(c.response_ids)])
        with torch.inference_mode():
            logits = model(input_ids=ids).logits[0, len(c.prompt_ids) - 1:-1].float()
        return torch.log_softmax(logits, -1).gather(-1, ids[0, len(c.prompt_ids):, None])[:, 0]

    (c,) = engine.generate_ids([prompt], SamplingParams(max_new_tokens=6, seed=1))
    recorded = torch.tensor(c.response_logprobs)
    assert next(engine.copy.model.parameters()).dtype == torch.bfloat16
    assert next(trainer.model.parameters()).dtype == torch.float32
    bf16, fp32 = logprobs(engine.copy.model, c), logprobs(trainer.model, c)
    # the first token comes from the prompt's forward, as the recomputation: the bf16 model's, to rounding
    assert recorded[0].item() == pytest.approx(bf16[0].item(), abs=1e-5)
    assert abs(recorded[0].item() - fp32[0].item()) > 1e-5  # not the fp32 trainer's
    assert torch.allclose(recorded, bf16, atol=5e-3)  # later tokens: bf16 decoding with a KV cache

    with torch.no_grad():  # an update: the next generation takes the new weights, rounded to bf16
        for p in trainer.model.parameters():
            p.add_(0.01)
    engine.generate_ids([prompt], SamplingParams(max_new_tokens=2, seed=1))
    for mine, theirs in zip(engine.copy.model.parameters(), trainer.model.parameters()):
        assert torch.equal(mine, theirs.detach().to(torch.bfloat16))


def _run(per_task: dict[str, float], kl: float) -> dict:
    return {"heldout_before": 0.3, "heldout_after": sum(per_task.values()) / len(per_task),
            "per_task_success": per_task,
            "per_iteration": [{"mismatch/kl_mean": kl, "train/ratio_max_first_minibatch": 1 + kl}]}


def test_summary_pairs_the_arms_per_seed_with_a_t_interval_over_seeds():
    runs = {"none/seed0": _run({"a": 0.0, "b": 0.5}, 0.01), "tis_token/seed0": _run({"a": 0.5, "b": 0.2}, 0.03),
            "none/seed1": _run({"a": 0.5, "b": 0.5}, 0.02), "tis_token/seed1": _run({"a": 1.0, "b": 0.4}, 0.02),
            "none/seed2": _run({"a": 0.0, "b": 0.0}, 0.02), "tis_token/seed2": _run({"a": 0.5, "b": 0.1}, 0.02),
            "none/seed3": _run({"a": 0.0, "b": 0.0}, 0.02)}  # seed 3's tis arm not run: left out of d
    out = rc.summarize(runs, ["none", "tis_token"], [0, 1, 2, 3])
    d = out["tis_token_minus_none"]
    assert d["seeds"] == [0, 1, 2]
    assert d["per_seed"] == pytest.approx([0.1, 0.2, 0.3])  # (0.5 - 0.3) / 2, (1.0 - 0.1) / 2 ... per task
    half = 4.303 * 0.1 / math.sqrt(3)  # t_{0.975, 2} x sd / sqrt(n)
    assert d["mean"] == pytest.approx(0.2)
    assert d["t_interval_95"] == pytest.approx([0.2 - half, 0.2 + half])
    assert out["none"]["seeds"] == [0, 1, 2, 3]
    assert out["none"]["first_minibatch_ratio_max"] == pytest.approx(1.02)
    assert out["mismatch_kl_mean"] == pytest.approx({"mean": 0.02, "min": 0.01, "max": 0.03})


def test_runs_of_other_settings_are_refused_in_one_line(tmp_path):
    setup = {"iterations": 12, "seeds": [0], "arms": {"none": []}, "engine": "hf-bf16"}
    same = {"setup": {**setup, "seeds": [0, 1]}, "previous_setup": setup, "runs": {"none/seed0": {}}}
    rc.check_same_setup(same, tmp_path / "r.json")  # other seeds: the same study, extended
    other = {"setup": {**setup, "iterations": 30}, "previous_setup": setup, "runs": {"none/seed0": {}}}
    with pytest.raises(SystemExit, match=r"other settings \(iterations\)"):
        rc.check_same_setup(other, tmp_path / "r.json")
