"""Tree rollouts: collect(..., branch=...) plays K continuations from restored snapshots."""

from __future__ import annotations

import pytest

import agentgym
from agentgym.chat import ChatEnv
from agentgym.core import TextEnv
from agentgym.errors import ConfigError
from agentgym.policies import Completion, RandomPolicy
from agentgym.rollout import BranchConfig
from agentgym.snapshot import SnapshotUnsupported
from agentgym.tasks.protocol import split_tasks
from agentgym.toy import COUNTER_ID, register_counter

HOUSEHOLD = "agentgym/Household-v0"
TASKS = split_tasks(agentgym.get_task_space(HOUSEHOLD), "train")[:2]


def _by_id(trajs):
    return {t.metadata["tree"]["id"]: t for t in trajs}


def test_branches_start_from_their_parent_s_state_and_record_the_tree():
    trajs = agentgym.collect(HOUSEHOLD, TASKS, RandomPolicy(seed=0), group_size=2, seed=1, session=None,
                             branch={"k": 2, "every": 4}, env_kwargs={"max_episode_steps": 10})
    roots = [t for t in trajs if t.metadata["tree"]["parent"] is None]
    branches = [t for t in trajs if t.metadata["tree"]["parent"] is not None]
    assert len(roots) == 4
    # every root branches at steps 0, 4 and 8 that it reached, two branches each
    assert len(branches) == sum(2 * len(range(0, len(r.steps), 4)) for r in roots)
    ids = _by_id(trajs)
    for b in branches:
        tree = b.metadata["tree"]
        parent = ids[tree["parent"]]
        at = parent.steps[tree["step"]]
        # the branch sees what its parent saw at that step (env state, anchor, conversation)
        assert (b.steps[0].observation, b.steps[0].anchor, b.steps[0].messages) == (at.observation, at.anchor, at.messages)
        assert b.group_id == parent.group_id and b.seed == parent.seed
        # the time limit counts the parent's steps: 10 in all
        assert tree["step"] + len(b.steps) <= 10
        assert b.terminated or b.truncated
    # grouped task by task: a group's branches follow its episodes
    groups = [t.group_id for t in trajs]
    assert groups == sorted(groups, key=groups.index)


def test_a_branch_replays_its_parent_when_it_takes_the_same_actions():
    # the oracle is deterministic: a branch from step 2 must end exactly as its parent did
    space = agentgym.get_task_space(HOUSEHOLD)
    trajs = agentgym.collect(HOUSEHOLD, TASKS[:1], agentgym.policies.OraclePolicy(space), group_size=1, session=None,
                             branch=BranchConfig(k=1, every=2))
    ids = _by_id(trajs)
    for b in trajs:
        tree = b.metadata["tree"]
        if tree["parent"] is None:
            continue
        parent = ids[tree["parent"]]
        tail = parent.steps[tree["step"]:]
        assert [(s.action, s.reward, s.observation) for s in b.steps] == [(s.action, s.reward, s.observation) for s in tail]
        assert (b.success, b.score) == (parent.success, parent.score)


def test_the_branch_cap_is_kept_and_what_it_skipped_is_counted():
    trajs = agentgym.collect(HOUSEHOLD, TASKS, RandomPolicy(seed=0), group_size=1, session=None,
                             branch={"k": 2, "every": 1, "max_branches": 6}, env_kwargs={"max_episode_steps": 5})
    branches = [t for t in trajs if t.metadata["tree"]["parent"] is not None]
    assert len(branches) == 6
    skipped = sum(t.metadata["tree"].get("skipped", 0) for t in trajs)
    reached = sum(len(t.steps) for t in trajs if t.metadata["tree"]["parent"] is None)
    assert skipped == reached - 3  # every root step was a branch point; 3 of them got their 2 branches


class _NoSnapshots(TextEnv):
    task_space = agentgym.get_task_space(HOUSEHOLD)

    def _reset(self, task):
        return "a room", {"task_id": task.task_id, "instruction": "x", "anchor": "a", "admissible_actions": None,
                          "action_valid": True, "success": False, "score": 0.0}


def _no_snapshot_env():
    return ChatEnv(_NoSnapshots())


def test_branching_an_env_without_snapshots_is_one_clear_error():
    with pytest.raises(SnapshotUnsupported) as err:
        agentgym.collect(_no_snapshot_env, TASKS[:1], RandomPolicy(), session=None, branch=2)
    assert "\n" not in str(err.value) and "snapshots" in str(err.value)


def test_branching_needs_the_envs_in_process():
    register_counter()
    with pytest.raises(ConfigError, match="inprocess or threads"):
        agentgym.collect(COUNTER_ID, [agentgym.get_task_space(COUNTER_ID).build_splits()["train"][0]], RandomPolicy(),
                         session=None, branch=2, executor="process", num_workers=1)


def test_bad_branch_options_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="branch.k"):
        BranchConfig(k=0)
    with pytest.raises(ConfigError, match="unknown branch options"):
        BranchConfig.of({"k": 2, "depth": 3})
    with pytest.raises(ConfigError, match="logprobs"):
        BranchConfig(at="entropy").chooses(0, Completion(text="x"))


class _CharTokenizer:
    """Characters as token ids, a plain chat template: enough for TokenContinuation."""

    chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\x01{% endfor %}"
                     "{% if add_generation_prompt %}<assistant>{% endif %}")
    eos_token, eos_token_id, name_or_path = "\x01", 1, "chars"

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        text = "".join(f"<{m['role']}>{m['content']}\x01" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


class _CountingPolicy:
    """A token-level policy over characters that replies inc or dec at random and records each
    batched call's prompt ids."""

    def __init__(self, seed=0):
        import random

        self.tokenizer, self.eos_ids, self.rng = _CharTokenizer(), {1}, random.Random(seed)
        self.calls: list[list[list[int]]] = []

    def encode_prompt(self, messages):
        return self.tokenizer(self.tokenizer.apply_chat_template(messages))["input_ids"]

    def generate(self, prompts, sampling=None, contexts=None):
        return self.generate_ids([self.encode_prompt(m) for m in prompts], sampling)

    def generate_ids(self, prompt_ids, sampling=None):
        self.calls.append([list(p) for p in prompt_ids])
        out = []
        for p in prompt_ids:
            text = self.rng.choice(["inc", "dec"])
            out.append(Completion(text=text, prompt_ids=list(p), response_ids=[ord(c) for c in text] + [1],
                                  response_logprobs=[-0.7] * 4))
        return out


def test_branches_continue_the_parent_s_exact_token_prefix_in_one_batched_call():
    from agentgym.chat_template import _compile

    # compiled once here, outside the render's time bound: the first compile is traced line by line
    # inside it, and on a loaded machine it can take longer than the bound allows
    _compile(_CharTokenizer.chat_template)
    register_counter()
    policy = _CountingPolicy()
    task = agentgym.get_task_space(COUNTER_ID).build_splits()["train"][5]
    trajs = agentgym.collect(COUNTER_ID, [task], policy, group_size=1, session=None,
                             chat={"history": "full", "parser": "raw"}, branch={"k": 3, "every": 2},
                             env_kwargs={"max_episode_steps": 4})
    ids = _by_id(trajs)
    branches = [t for t in trajs if t.metadata["tree"]["parent"] is not None]
    assert len(branches) == 6  # steps 0 and 2
    for b in branches:
        tree = b.metadata["tree"]
        # the parent's prompt ids at the branch step, continued token for token, not re-rendered
        assert b.steps[0].prompt_ids == ids[tree["parent"]].steps[tree["step"]].prompt_ids
        if len(b.steps) > 1:  # and the branch's next prompt extends its own first prompt and reply
            assert b.steps[1].prompt_ids[:len(b.steps[0].prompt_ids)] == b.steps[0].prompt_ids
    # the three branches of a point start in the same call when envs are free for them (an engine that
    # prefills identical prompts once, as HFPolicy does, prefills them once)
    first = [b for b in branches if b.metadata["tree"]["step"] == 0][0].steps[0].prompt_ids
    assert any(sum(p == first for p in call) == 3 for call in policy.calls)


def test_entropy_branching_picks_the_steps_whose_replies_were_surprising():
    register_counter()
    task = agentgym.get_task_space(COUNTER_ID).build_splits()["train"][5]
    # every reply of this policy has a mean surprise of 0.7 nats per token
    low = agentgym.collect(COUNTER_ID, [task], _CountingPolicy(), session=None, chat={"parser": "raw"},
                           branch={"k": 1, "at": "entropy", "min_entropy": 0.5}, env_kwargs={"max_episode_steps": 3})
    high = agentgym.collect(COUNTER_ID, [task], _CountingPolicy(), session=None, chat={"parser": "raw"},
                            branch={"k": 1, "at": "entropy", "min_entropy": 0.8}, env_kwargs={"max_episode_steps": 3})
    root = low[0]
    assert len(low) == 1 + len(root.steps)  # a branch at every step of the root
    assert len(high) == 1


def test_a_branched_rollout_replays_byte_for_byte():
    def play():
        trajs = agentgym.collect(HOUSEHOLD, TASKS, RandomPolicy(seed=3), group_size=2, seed=7, session=None,
                                 branch={"k": 2, "every": 3}, env_kwargs={"max_episode_steps": 8})
        return [t.to_dict() for t in trajs]

    assert play() == play()  # tree ids included: a saved tree rollout names the same parents when replayed
