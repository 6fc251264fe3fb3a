"""The CUDA path on a real card (marker `gpu`, skipped without CUDA; benchmarks/gpu/gpu_check.py runs
them on a lent GPU, docs/gpu.md): the HF engine in fp32 and bf16 trains exactly the tokens it
sampled, with the first PPO ratio 1 within the dtype's tolerance; admissible-only decoding; LoRA;
the data-parallel launch with one rank; checkpoint save and exact resume. Each records the figure
it checks (`record_property`), so the check's JSON carries it.
AGENTGYM_GPU_TEST_DEVICE=cpu runs them on the CPU instead (a dry run of the tests themselves)."""

from __future__ import annotations

import os

import pytest
import torch

from tests.trainers.conftest import SHORT_CHAT
from tests.trainers.test_admissible_only import ACTIONS, _play, _worst_ratio_error
from tests.trainers.test_data_parallel import GROUP, WORKER, _run, batch  # noqa: F401  (batch: a fixture)
from tests.trainers.test_token_in_token_out import _collect, check_one_sequence_per_episode

DEVICE = os.environ.get("AGENTGYM_GPU_TEST_DEVICE", "cuda")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                                                  reason="needs a CUDA device")]

# |log pi_train - log pi_sampled| at the first update, worst token: fp32 differs only by the order
# of sums between a one-row decode step and a whole-sequence pass; bf16 rounds every activation to
# 8 bits of mantissa (~0.4%), so the two passes part by more: on this untrained model (logits of a
# few units) 0.002 on a CPU, and 0.1 leaves the card's other kernels room without passing a shifted
# or mis-masked token (several nats off).
RATIO_ATOL = {"fp32": 1e-4, "bf16": 0.1}


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cuda_engine_trains_exactly_what_it_sampled(dtype, toy_env_id, tiny_policy_factory, record_property):
    policy = tiny_policy_factory(device=DEVICE, dtype=dtype)
    weights = next(policy.model.parameters())
    assert weights.device.type == torch.device(DEVICE).type
    assert weights.dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    trajectories = _collect(policy, toy_env_id)
    worst = check_one_sequence_per_episode(trajectories, policy, atol=RATIO_ATOL[dtype])
    record_property("worst_logprob_diff", worst)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cuda_admissible_only_decoding(dtype, toy_env_id, tiny_policy_factory, record_property):
    policy = tiny_policy_factory(device=DEVICE, dtype=dtype)
    constrained = _play(policy, toy_env_id, SHORT_CHAT, True)
    steps = [s for t in constrained for s in t.steps]
    assert steps and all(s.action in ACTIONS and s.response_allowed for s in steps)
    worst = _worst_ratio_error(policy, constrained, "per-step")
    record_property("worst_logprob_diff", worst)
    assert worst < RATIO_ATOL[dtype]


def test_cuda_lora_trains_the_adapter_only(tmp_path, toy_config, tiny_model_dir, record_property):
    from safetensors.torch import load_file

    from agentgym.trainers.training import train

    cfg = toy_config(tmp_path, tiny_model_dir, f"policy.device={DEVICE}", "policy.lora={r: 4}", "iterations=1",
                     "checkpoint_every=0", "ppo.drop_abs_adv_below=0", "ppo.entropy_coef=0.01")
    train(cfg, log=lambda _: None)
    final = tmp_path / "run" / "final_model"
    assert not list(final.glob("model*.safetensors"))  # the adapter is saved, not the base model
    adapter = load_file(str(final / "adapter_model.safetensors"))
    moved = max(float(t.abs().max()) for k, t in adapter.items() if "lora_B" in k)  # lora_B starts at 0
    record_property("largest_lora_B_weight", moved)
    assert moved > 0


def test_cuda_data_parallel_launch_with_one_rank(batch, tiny_model_dir, tmp_path, record_property):  # noqa: F811
    """`torchrun --nproc-per-node 1` on the card gives the single process's update."""
    one, ranked = tmp_path / "one.pt", tmp_path / "ranked.pt"
    _run([str(WORKER), str(tiny_model_dir), str(batch), str(one), str(GROUP), f"--device={DEVICE}"])
    _run(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", str(WORKER), str(tiny_model_dir),
          str(batch), str(ranked), str(GROUP), f"--device={DEVICE}"])
    a, b = (torch.load(p, weights_only=False) for p in (one, ranked))
    assert a["stats"]["optimizer_steps"] == b["stats"]["optimizer_steps"] >= 4
    diff = max(float((a["params"][k] - b["params"][k]).abs().max()) for k in a["params"])
    record_property("max_param_diff", diff)
    assert diff < 1e-6, diff


@pytest.fixture
def deterministic_kernels(request):
    """With a true param: torch.use_deterministic_algorithms for the test (an op without a
    deterministic kernel raises, naming itself; cuBLAS needs CUBLAS_WORKSPACE_CONFIG, which
    scripts/gpu_check.sh sets)."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(request.param)
    yield request.param
    torch.use_deterministic_algorithms(was)


@pytest.mark.parametrize("deterministic_kernels", [False, True], ids=["default", "deterministic"], indirect=True)
def test_cuda_resume_is_exact(tmp_path, toy_config, sft_model_dir, record_property, deterministic_kernels):
    """train 2 iterations == train 1, save, resume, train 1 more: the same weights, bit for bit,
    with torch's default kernels and with its deterministic ones."""
    from safetensors.torch import load_file

    from agentgym.trainers.training import train

    def final(run: str) -> dict:
        return load_file(str(tmp_path / run / "run" / "final_model" / "model.safetensors"))

    train(toy_config(tmp_path / "a", sft_model_dir, f"policy.device={DEVICE}", "iterations=2"), log=lambda _: None)
    train(toy_config(tmp_path / "b", sft_model_dir, f"policy.device={DEVICE}", "iterations=1"), log=lambda _: None)
    train(toy_config(tmp_path / "b", sft_model_dir, f"policy.device={DEVICE}", "iterations=2"), resume=True,
          log=lambda _: None)
    a, b = final("a"), final("b")
    diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    record_property("max_param_diff_resumed", diff)
    if diff:  # tell a resume that restores too little from kernels that differ run to run
        train(toy_config(tmp_path / "c", sft_model_dir, f"policy.device={DEVICE}", "iterations=2"), log=lambda _: None)
        again = max(float((a[k].float() - final("c")[k].float()).abs().max()) for k in a)
        record_property("max_param_diff_same_run_twice", again)
        assert diff == 0, f"resumed run {diff:.3g} from the straight one; the straight run twice: {again:.3g}"
    start = load_file(str(sft_model_dir / "model.safetensors"))
    assert any(not torch.equal(a[k].cpu().float(), start[k].float()) for k in a)  # training moved the weights
