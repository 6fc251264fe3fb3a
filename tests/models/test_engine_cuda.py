"""policy.engine=pool on a CUDA card (marker `gpu`, skipped without CUDA; scripts/gpu_engine.sh runs them on
a lent GPU): the decode step captured as CUDA graphs decodes as the eager HF path does (fp32: the same greedy
tokens, logprobs within 1e-4; bf16: within 0.2 where the replies agree), replays after the weights change,
and a call larger than the largest captured size decodes eagerly, in one line.
AGENTGYM_GPU_TEST_DEVICE=cpu runs them on the CPU instead (graphs=True uncaptured: a dry run of the tests)."""

from __future__ import annotations

import os

import pytest
import torch

from agentgym.policies.base import SamplingParams
from tests.models.test_engine_pool import _policies, _prompts, _same, model_dir  # noqa: F401  (a fixture)

DEVICE = os.environ.get("AGENTGYM_GPU_TEST_DEVICE", "cuda")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                                                  reason="needs a CUDA device")]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_captured_steps_decode_as_the_eager_path(dtype, model_dir, record_property):  # noqa: F811
    eager, pooled = _policies(model_dir, device=DEVICE, dtype=dtype, lora={"r": 4})
    lines: list[str] = []
    pooled.use_pool_engine(graphs=True, log=lines.append)
    prompts = _prompts(eager, 12)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=16)
    keys = [f"e{i}" for i in range(12)]
    # bf16: this fixture's head is sharpened 8x (few near ties), which magnifies one bf16 rounding of the
    # adapters' branch into 0.05-0.10 of a logprob (0 without adapters, on a CPU); a shifted or mis-masked
    # token is nats off
    tol = 1e-4 if dtype == "fp32" else 0.2
    for _update in range(2):
        fast, plain = pooled.generate_ids(prompts, sampling, cache_keys=keys), eager.generate_ids(prompts, sampling)
        if dtype == "fp32":
            _same(fast, plain, tol)
        else:
            for x, y in zip(fast, plain):
                same = next((i for i, (a, b) in enumerate(zip(x.response_ids, y.response_ids)) if a != b),
                            len(x.response_ids))
                assert max((abs(a - b) for a, b in zip(x.response_logprobs[:same], y.response_logprobs[:same])), default=0) < tol
        with torch.no_grad():  # an update: the captured graph must read the new factors
            for p in eager.trainable_parameters():
                p.add_(torch.randn_like(p) * 0.05)
    engine = pooled.pool_engine
    record_property("captures", engine.stats.captures)
    assert engine.stats.eager_steps == 0 and not engine._failed
    if DEVICE.startswith("cuda"):
        assert engine.stats.captures == 1 and any("captured the decode step at 16 rows" in line for line in lines)


def test_more_rows_than_the_largest_captured_size_decode_eagerly_in_one_line(model_dir):  # noqa: F811
    from agentgym.policies import pool_engine

    eager, pooled = _policies(model_dir, device=DEVICE)
    lines: list[str] = []
    pooled.use_pool_engine(graphs=True, log=lines.append)
    sizes = pool_engine.GRAPH_SIZES
    pool_engine.GRAPH_SIZES = (1, 2, 4)
    try:
        prompts = _prompts(eager, 6)
        sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
        _same(pooled.generate_ids(prompts, sampling), eager.generate_ids(prompts, sampling))
    finally:
        pool_engine.GRAPH_SIZES = sizes
    assert [line for line in lines if "exceed the largest captured" in line] == \
        ["policy.engine=pool: 6 rows exceed the largest captured decode step (4 rows): they decode eagerly"]
    assert pooled.pool_engine.stats.eager_steps > 0
