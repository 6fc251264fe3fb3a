"""Tree rollouts share the token prefix in the engine: a branch's first turn starts from its parent's
cached keys and values (HFPolicy.fork, PoolEngine.fork) and prefills one token, with the replies and
logprobs of an engine that caches nothing; the parent's cache is left as it was, every cache is
released when the rollout ends, and branching past the KV pool's budget is said in the log."""

from __future__ import annotations

import pytest
import torch

import agentgym
from agentgym.policies.base import SamplingParams
from agentgym.tasks.protocol import split_tasks

HOUSEHOLD = "agentgym/Household-v0"
TASKS = split_tasks(agentgym.get_task_space(HOUSEHOLD), "train")[:2]
CHATS = {"full": {"parser": "raw", "history": "full", "system_prompt": ""},
         "windowed": {"parser": "raw", "history": 0, "system_prompt": "", "memory": 12, "memory_style": "marks"}}
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=6)
BRANCH = {"k": 2, "every": 2}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts

    torch.set_num_threads(1)
    texts = collect_env_texts(HOUSEHOLD, num_tasks=4, chat=CHATS["windowed"], session=None)
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), env_id=HOUSEHOLD, texts=texts, vocab_size=400,
                            hidden=64, layers=2, heads=4)


def _policy(model_dir, engine: str = "hf", log=None):
    from agentgym.policies.hf import HFPolicy

    policy = HFPolicy(model_dir)
    if engine == "pool":
        policy.use_pool_engine(log=log or (lambda line: None))
    return policy


def _counting(policy) -> list[tuple[str, int]]:
    """(cache key, tokens prefilled) of every prompt the engine computes, in order."""
    rows: list[tuple[str, int]] = []
    if policy.pool_engine is not None:
        engine, real = policy.pool_engine, policy.pool_engine._generate_part

        def part(rows_in, prompt_ids, keys, sampling, tries):
            out = real(rows_in, prompt_ids, keys, sampling, tries)
            rows.extend((keys[i], n) for i, n in zip(rows_in, policy.last_prefill_tokens))
            return out

        engine._generate_part = part
    else:
        real = policy._sample

        def sample(prompt_ids, sampling, cache_keys=None, **options):
            out = real(prompt_ids, sampling, cache_keys, **options)
            rows.extend(zip(cache_keys, policy.last_prefill_tokens))
            return out

        policy._sample = sample
    return rows


def _collect(policy, chat: str, branch=None, tasks=TASKS, steps: int = 6):
    return agentgym.collect(HOUSEHOLD, tasks, policy, 1, seed=3, chat=CHATS[chat], sampling=GREEDY, session=None,
                            branch=branch, env_kwargs={"max_episode_steps": steps})


def _by_id(trajs):
    return {t.metadata["tree"]["id"]: t for t in trajs}


def _same_steps(a, b, atol: float = 1e-5) -> None:
    assert [s.prompt_ids for s in a] == [s.prompt_ids for s in b]
    assert [s.response_ids for s in a] == [s.response_ids for s in b]
    for x, y in zip(a, b):
        assert max((abs(p - q) for p, q in zip(x.response_logprobs, y.response_logprobs)), default=0.0) < atol


def _first_turn_prefill(rows, roots: int) -> list[int]:
    """Tokens prefilled at each branch's first turn (episodes past the roots), in order."""
    seen, first = set(), []
    for key, n in rows:
        if int(key.rsplit(":", 1)[1]) >= roots and key not in seen:
            first.append(n)
        seen.add(key)
    return first


def _leftover(policy) -> int:
    return len(policy._prefixes) + (len(policy.pool_engine.pool.owner) + len(policy.pool_engine.forks)
                                    if policy.pool_engine is not None else 0)


@pytest.fixture(scope="module")
def uncached(model_dir):
    """The tree rollouts of an engine that caches nothing (every prompt prefilled whole), per chat layout."""
    plain = _policy(model_dir)
    plain.reuse_kv = False
    return {chat: _collect(plain, chat, BRANCH) for chat in CHATS}


@pytest.mark.parametrize("engine", ["hf", "pool"])
@pytest.mark.parametrize("chat", list(CHATS))
def test_a_branch_s_first_turn_reuses_its_parent_s_cache_and_computes_what_no_cache_computes(model_dir, uncached,
                                                                                            chat, engine):
    policy = _policy(model_dir, engine)
    rows = _counting(policy)
    trajs = _collect(policy, chat, BRANCH)
    assert len(trajs) == len(uncached[chat]) > len(TASKS)
    # roots and branches alike: a corrupted parent cache or a wrong fork would change tokens or logprobs
    for a, b in zip(trajs, uncached[chat]):
        assert a.metadata["tree"] == b.metadata["tree"]
        _same_steps(a.steps, b.steps)
    # a branch's first turn computes its prompt's last token at most (none where an identical prompt of
    # the same call, a sibling branch's, computed it)
    first = _first_turn_prefill(rows, len(TASKS))
    assert len(first) == len(trajs) - len(TASKS)
    assert set(first) == {0, 1}
    assert _leftover(policy) == 0  # every cache released when the rollout ends, the branches' included


def test_branches_past_the_kv_pool_s_budget_decode_in_parts_and_the_log_says_so(model_dir):
    lines: list[str] = []
    policy = _policy(model_dir, "pool", log=lines.append)
    pool = policy.pool_engine.pool
    pool.max_bytes = pool.bytes_for(3, 512)  # three episodes' caches: the root and its 4 branches do not fit
    rows = _counting(policy)
    branch = {"k": 4, "every": 3}  # 4 branches at steps 0 and 3 of one episode
    trajs = _collect(policy, "full", branch, tasks=TASKS[:1])
    eager = _collect(_policy(model_dir), "full", branch, tasks=TASKS[:1])
    assert len(trajs) == len(eager) > 1
    for a, b in zip(trajs, eager):
        _same_steps(a.steps, b.steps)
    # what the engine did, each said once in one line: evicted idle caches, decoded a call in parts, and
    # prefilled whole the branches whose parent's cache it had evicted before they started
    assert len(lines) == 3 and all("\n" not in line for line in lines), lines
    assert "evicted" in lines[0] and "waiting" in lines[1] and "prefills its whole prompt" in lines[2]
    first = _first_turn_prefill(rows, 1)
    assert first[0] == 1 and max(first) > 1  # the first point's branches forked, the last point's could not
    assert _leftover(policy) == 0
