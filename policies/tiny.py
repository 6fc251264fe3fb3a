"""Build a tiny chat model for an environment: a BPE tokenizer trained on the env's own text
plus a small Llama/Qwen2-config causal LM with random weights, saved as a standard HF folder.

CPU runs and tests then load it with `AutoTokenizer/AutoModelForCausalLM.from_pretrained(path)`,
the same code path as a hub model such as "Qwen/Qwen2.5-1.5B-Instruct". Nothing is downloaded.

The text is the caller's: a trainer gathers it from oracle and random rollouts of the env
(agentgym.trainers.run_setup.collect_env_texts; a policy does not play episodes), so the tokenizer
has a token for nearly every word the agent will read or write (short sequences, easy copying).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

from agentgym.errors import ConfigError
from agentgym.rewards.meta_reasoning import TAG_STRINGS

ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}
END_TOKEN = "<|end|>"
PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|bos|>"
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, END_TOKEN, *ROLE_TOKENS.values()]

# One role marker, the content, then <|end|>; the generation prompt is the assistant marker.
# The assistant's reply ends with <|end|> = the eos token, so generation stops there, and a
# rendered conversation is a prefix of the same conversation with one more turn (which lets
# the trainer merge the steps of an episode into one sequence without re-tokenizing).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1500, added_tokens: Sequence[str] = ()):
    """A byte-level BPE tokenizer (lossless on any text) with the chat role markers as special
    tokens, wrapped as a PreTrainedTokenizerFast with the chat template set. `added_tokens`: strings
    kept whole as one ordinary token each (decoded as written), e.g. the meta-reasoning tags."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS_TOKEN,
        eos_token=END_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=list(ROLE_TOKENS.values()),
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    if added_tokens:
        from tokenizers import AddedToken

        fast.add_tokens([AddedToken(t, normalized=False, special=False) for t in added_tokens])
    return fast


def tiny_config(tokenizer, arch: str = "llama", hidden: int = 128, layers: int = 2, heads: int = 4,
                intermediate: int | None = None, max_positions: int = 4096):
    from transformers import LlamaConfig, Qwen2Config

    kwargs = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if arch == "llama":
        return LlamaConfig(**kwargs)
    if arch == "qwen2":
        return Qwen2Config(**kwargs)
    raise ConfigError(f"unknown tiny-model arch {arch!r}; choose llama or qwen2")


def build_tiny_model(
    out_dir: str | Path,
    env_id: str = "agentgym/Household-v0",
    texts: Sequence[str] | None = None,
    vocab_size: int = 1500,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 4,
    intermediate: int | None = None,
    arch: str = "llama",
    seed: int = 0,
    meta_tags: bool = False,
) -> Path:
    """Train the tokenizer, initialise the model with `seed`, save both under `out_dir`.

    texts: the corpus, e.g. an env's prompts and replies from oracle and random rollouts
    (agentgym.trainers.run_setup.collect_env_texts, with the ChatEnv options training will use);
    env_id is recorded beside the model. meta_tags: the replies will carry RLVMR tags (sft.tags):
    each tag string (`<explore>`, `</explore>`, ..., `<action>`) is one token."""
    import torch  # torch and transformers: the train extra, loaded when a model is built
    from transformers import AutoModelForCausalLM, GenerationConfig

    if texts is None:
        raise ConfigError("build_tiny_model needs texts to train its tokenizer on: pass texts=... "
                          "(agentgym.trainers.run_setup.collect_env_texts(env_id) gathers an env's)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    added: tuple[str, ...] = tuple(TAG_STRINGS) if meta_tags else ()
    # Role markers appear in every rendered prompt; include them so their neighbours merge well.
    tokenizer = train_tokenizer(list(texts) + list(ROLE_TOKENS.values()), vocab_size=vocab_size, added_tokens=added)
    config = tiny_config(tokenizer, arch=arch, hidden=hidden, layers=layers, heads=heads, intermediate=intermediate)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "agentgym_tiny.json").write_text(json.dumps(
        {"env_id": env_id, "arch": arch, "hidden": hidden, "layers": layers, "heads": heads,
         "vocab_size": len(tokenizer), "params": sum(p.numel() for p in model.parameters()), "seed": seed},
        indent=2))
    return out
