"""The tiny-model builder and HFPolicy: standard HF folders, exact token ids and logprobs."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentgym.policies.base import SamplingParams  # noqa: E402

MESSAGES = [
    [{"role": "system", "content": "Act."}, {"role": "user", "content": "You are in room 0. Take the key in room 2."}],
    [{"role": "user", "content": "You are in room 3."}],
]


def test_tiny_model_reloads_with_from_pretrained(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "llama"
    assert model.config.vocab_size == len(tok) <= 400
    text = "You are in room 2. You see a key. <action>take key</action>"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    rendered = tok.apply_chat_template(MESSAGES[0], add_generation_prompt=True, tokenize=False)
    assert rendered.startswith("<|system|>Act.<|end|><|user|>") and rendered.endswith("<|assistant|>")
    # role markers are single special tokens, and eos is the end-of-turn marker
    ids = tok.apply_chat_template(MESSAGES[0], add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert ids[-1] == tok.convert_tokens_to_ids("<|assistant|>")
    assert tok.eos_token == "<|end|>"
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), len(tok))


def test_unknown_arch_is_a_config_error(tmp_path):
    from agentgym.errors import ConfigError
    from agentgym.policies.tiny import build_tiny_model

    with pytest.raises(ConfigError, match="arch"):
        build_tiny_model(tmp_path, texts=["a b c"] * 10, vocab_size=300, arch="gpt9")


def _recomputed_logprobs(policy, prompt_ids, response_ids):
    ids = torch.tensor([prompt_ids + response_ids])
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(ids).logits[0, :-1].float(), -1)
    targets = ids[0, 1:]
    return logp.gather(-1, targets[:, None])[:, 0][len(prompt_ids) - 1:]


def test_generation_records_exact_ids_and_logprobs(tiny_policy_factory):
    policy = tiny_policy_factory()
    comps = policy.generate(MESSAGES, SamplingParams(temperature=1.0, max_new_tokens=10, seed=3))
    assert len(comps) == 2
    assert len(policy.encode_prompt(MESSAGES[0])) != len(policy.encode_prompt(MESSAGES[1]))  # left padding exercised
    for messages, comp in zip(MESSAGES, comps):
        assert comp.prompt_ids == policy.encode_prompt(messages)
        assert comp.text == policy.tokenizer.decode(comp.response_ids, skip_special_tokens=True)
        assert len(comp.response_logprobs) == len(comp.response_ids) >= 1
        expected = _recomputed_logprobs(policy, comp.prompt_ids, comp.response_ids)
        torch.testing.assert_close(torch.tensor(comp.response_logprobs), expected, atol=1e-4, rtol=1e-4)
        assert comp.finish_reason in ("stop", "length")
        if comp.finish_reason == "length":
            assert len(comp.response_ids) == 10


def test_same_seed_same_rollout_and_greedy_is_argmax(tiny_policy_factory):
    policy = tiny_policy_factory()
    a = policy.generate(MESSAGES, SamplingParams(max_new_tokens=8, seed=11))
    policy.reseed(999)
    b = policy.generate(MESSAGES, SamplingParams(max_new_tokens=8, seed=11))
    assert [c.response_ids for c in a] == [c.response_ids for c in b]
    greedy = policy.generate(MESSAGES[:1], SamplingParams(temperature=0.0, max_new_tokens=4))[0]
    with torch.no_grad():
        first = policy.model(torch.tensor([greedy.prompt_ids])).logits[0, -1].argmax()
    assert greedy.response_ids[0] == int(first)


def test_generation_stops_at_eos(tiny_policy_factory):
    policy = tiny_policy_factory()
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    first = policy.generate(MESSAGES[:1], greedy)[0].response_ids[0]
    policy.eos_ids = {first}  # make the token the model picks first an end-of-turn token
    comp = policy.generate(MESSAGES[:1], greedy)[0]
    assert comp.response_ids == [first] and comp.finish_reason == "stop"


def test_missing_model_path_is_a_config_error():
    from agentgym.errors import ConfigError
    from agentgym.policies.hf import HFPolicy

    with pytest.raises(ConfigError, match="does not exist"):
        HFPolicy("./no/such/model")
