"""Build a tiny chat model for an environment: a BPE tokenizer trained on the env's own text
plus a small Llama/Qwen2-config causal LM with random weights, saved as a standard HF folder.

CPU runs and tests then load it with `AutoTokenizer/AutoModelForCausalLM.from_pretrained(path)`,
the same code path as a hub model such as "Qwen/Qwen2.5-1.5B-Instruct". Nothing is downloaded.

The text comes from oracle and random rollouts through `agentgym.collect`, so the tokenizer
has a token for nearly every word the agent will read or write (short sequences, easy copying).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

from agentgym import progress

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


def collect_env_texts(env_id: str, num_tasks: int = 64, seed: int = 0, chat: dict | None = None,
                      split: str = "train", meta_tags: bool = False, session=progress.CURRENT) -> list[str]:
    """Prompts and replies seen in oracle and random rollouts of `num_tasks` train tasks; with
    `meta_tags` the oracle's replies carry the meta-reasoning tags a tagged warm start writes.
    session: where the rollouts' bars draw (agentgym.progress)."""
    from agentgym.policies.scripted import OraclePolicy, RandomPolicy
    from agentgym.registration import get_task_space
    from agentgym.rollout import collect
    from agentgym.tasks.generation import fresh_tasks
    from agentgym.tasks.space import TaskSpace

    space = get_task_space(env_id)
    tasks = space.split(split)[:num_tasks]
    if not tasks and type(space).sample is not TaskSpace.sample:  # a generator and no split: fresh tasks
        tasks = fresh_tasks(space, num_tasks, seed=seed)
    if not tasks:
        from agentgym.errors import ConfigError

        raise ConfigError(f"{env_id} has no {split} tasks to learn a tokenizer from: give its TaskSpace a "
                          f"{split!r} split, or pass policy.model=PATH_OR_HUB_ID instead of building a tiny model")
    texts: list[str] = []
    # the oracle only when the env has one (it shows the replies that solve tasks); random play always
    has_oracle = type(space).solve is not TaskSpace.solve
    for policy in ((OraclePolicy(space, tags=meta_tags),) if has_oracle else ()) + (RandomPolicy(seed),):
        for traj in collect(env_id, tasks, policy, group_size=1, seed=seed, chat=chat, session=session):
            for step in traj.steps:
                texts.extend(m["content"] for m in (step.messages or []))
                texts.append(step.text)
            texts.append(traj.final_observation)
    if meta_tags:  # every tag with its note, also those the plain oracle never writes (monitor, reflection)
        from agentgym.rewards.meta_reasoning import TAGS, tagged_reply

        texts.extend(tagged_reply(tag, "<action>look</action>") for tag in TAGS for _ in range(len(texts) // 100 + 1))
    return texts


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
    from agentgym.errors import ConfigError

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
    num_tasks: int = 64,
    chat: dict | None = None,
    meta_tags: bool = False,
    session=progress.CURRENT,
) -> Path:
    """Train the tokenizer, initialise the model with `seed`, save both under `out_dir`.

    texts: the corpus; by default gathered from oracle and random rollouts of `env_id` (with
    the ChatEnv options `chat`, so the prompts match what training will show). meta_tags: the
    replies will carry RLVMR tags (sft.tags): the corpus shows them and each tag string
    (`<explore>`, `</explore>`, ..., `<action>`) is one token."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if texts is None:
        texts = collect_env_texts(env_id, num_tasks=num_tasks, seed=seed, chat=chat, meta_tags=meta_tags,
                                  session=session)
    added: tuple[str, ...] = ()
    if meta_tags:
        from agentgym.rewards.meta_reasoning import TAG_STRINGS as added
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
