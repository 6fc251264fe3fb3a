"""sft.tags: the demonstrator's replies carry an RLVMR meta-reasoning tag picked by rule from what it
does, the tiny tokenizer holds the tags, and a warm start trained on them writes replies that parse
(tag + action). Issue 41, item 3 (the LLM comparison's tagged layout)."""

from __future__ import annotations

import pytest

from agentgym.errors import ConfigError
from agentgym.parsing import TagActionParser
from agentgym.rewards.meta_reasoning import (TAG_STRINGS, MetaReasoningConfig, demonstration_tag, meta_rewards,
                                             parse_tags)

HOUSEHOLD = "agentgym/Household-v0"
CHAT = {"parser": "tag", "history": 0, "system_prompt": "", "memory": 12, "memory_style": "marks"}
TAGGED = ["env.chat.parser=tag", "sft.tags=true", "rollout.max_new_tokens=24"]


def test_demonstration_tag_reflects_after_a_failure_and_otherwise_keeps_the_kind():
    for kind in ("planning", "explore", "monitor"):
        assert demonstration_tag(kind, after_failure=False) == kind
        assert demonstration_tag(kind, after_failure=True) == "reflection"
    with pytest.raises(ValueError, match="not one of"):
        demonstration_tag("wander", after_failure=False)


def test_household_meta_tag_classes_commands_by_what_they_do():
    from agentgym.registration import get_task_space

    space = get_task_space(HOUSEHOLD)
    assert space.meta_tag("go to fridge 1", []) == "explore"
    assert space.meta_tag("go to fridge 1", ["go to fridge 1", "go to sofa 1"]) == "planning"  # going back
    assert space.meta_tag("open fridge 1", ["go to fridge 1"]) == "explore"
    assert space.meta_tag("open fridge 1", ["go to fridge 1", "open fridge 1"]) == "planning"
    for idle in ("look", "inventory", "examine fridge 1", "examine apple 1"):
        assert space.meta_tag(idle, []) == "monitor"
    for act in ("take apple 1 from fridge 1", "move apple 1 to sofa 1", "use desklamp 1", "heat apple 1 with microwave 1"):
        assert space.meta_tag(act, []) == "planning"


def _tagged_demonstrations(n=30, **kw):
    from agentgym.registration import get_task_space
    from agentgym.tasks.generation import fresh_tasks
    from agentgym.trainers.sft import oracle_trajectories

    tasks = fresh_tasks(get_task_space(HOUSEHOLD), n, seed=1)
    return oracle_trajectories(HOUSEHOLD, tasks, CHAT, {"max_episode_steps": 12}, seed=0, slip_prob=0.2,
                               search=True, dawdle_prob=0.4, filter_success=False, tags=True, **kw)


def test_tagged_demonstrator_follows_the_rule_and_every_reply_parses():
    from agentgym.registration import get_task_space

    space = get_task_space(HOUSEHOLD)
    trajs = _tagged_demonstrations()
    parser = TagActionParser()
    seen = set()
    for traj in trajs:
        earlier = []
        for t, step in enumerate(traj.steps):
            parsed = parse_tags(step.text)
            assert parsed.well_formed, (step.text, parsed.problem)
            assert parser.parse(step.text).action == step.action
            failed = t > 0 and not traj.steps[t - 1].action_valid
            assert parsed.tag == demonstration_tag(space.meta_tag(step.action, earlier), failed), step.text
            seen.add(parsed.tag)
            if step.action_valid:
                earlier.append(step.action)
    assert seen == {"planning", "explore", "reflection", "monitor"}
    # the rules fire on these demonstrations, reflection included (slips are failed actions)
    fired = set()
    for traj in trajs:
        rec = meta_rewards(traj, MetaReasoningConfig())
        fired |= {tag for tag, r in zip(rec.tags, rec.rewards) if r > 0}
    assert {"explore", "reflection", "planning"} <= fired


def test_sft_tags_option_and_its_refusals(tmp_path):
    from agentgym.tasks.space import TaskSpace
    from agentgym.trainers.config import load_config
    from agentgym.trainers.env_requirements import check_env_features
    from agentgym.policies.scripted import OraclePolicy

    cfg = load_config("household-tiny", TAGGED)
    assert cfg.sft.tags is True
    assert load_config("household-tiny").sft.tags is False
    with pytest.raises(ConfigError, match="env.chat.parser=tag"):
        load_config("household-tiny", ["sft.tags=true"])  # the preset's raw parser cannot read a tagged reply

    class NoTags(TaskSpace):
        env_id = HOUSEHOLD

        def solve(self, spec):
            return []

        def solve_searching(self, spec, rng, dawdle_prob=0.0):
            return []

    with pytest.raises(ConfigError, match="sft.tags=false"):
        cfg = load_config("household-tiny", TAGGED + ["env.requires=[]", "env.categories=[]", "env.fresh_tasks=0"])
        check_env_features(cfg.env, cfg.sft, NoTags())
    with pytest.raises(ValueError, match="meta_tag"):
        OraclePolicy(NoTags(), search=True, tags=True)


def test_sft_tags_changes_the_warm_start_settings_only_when_on():
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import settings_hash, sft_settings, tiny_settings

    plain, tagged = load_config("household-tiny"), load_config("household-tiny", TAGGED)
    def tiny(c):
        return tiny_settings(c.env, c.tiny, c.sft, c.seed)

    def sft(c):
        return sft_settings(c.env, c.policy, c.sft, c.seed, {})

    assert "sft.tags" not in sft(plain) and "meta_tags" not in tiny(plain)
    assert settings_hash(tiny(plain)) != settings_hash(tiny(tagged))
    assert sft(tagged)["sft.tags"] is True


@pytest.mark.slow
def test_tagged_warm_start_tokenizes_tags_whole_and_writes_replies_that_parse(tmp_path):
    import torch

    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts
    from agentgym.trainers.sft import sft_samples, train_sft

    torch.set_num_threads(1)
    texts = collect_env_texts(HOUSEHOLD, num_tasks=8, chat=CHAT, meta_tags=True)
    path = build_tiny_model(tmp_path / "tiny", env_id=HOUSEHOLD, texts=texts, vocab_size=600, hidden=64, layers=2,
                            heads=4, meta_tags=True)
    policy = HFPolicy(path)
    for tag in TAG_STRINGS:
        assert len(policy.tokenizer(tag, add_special_tokens=False)["input_ids"]) == 1, tag
    trajs = _tagged_demonstrations(60)
    samples = sft_samples(policy, trajs)
    train_sft(policy, samples, epochs=3, lr=3e-3, batch_size=32, seed=0)
    prompts = [s.messages for t in trajs[:4] for s in t.steps[:3]]
    replies = policy.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=24))
    parser = TagActionParser()
    for reply in replies:
        assert parse_tags(reply.text).well_formed, reply.text
        assert parser.parse(reply.text).action, reply.text


def test_a_chat_option_added_later_at_its_old_value_keeps_built_models_reusable(tmp_path):
    """memory_seen and memory_unvisited came after warm starts were built: off, they are left out of the settings
    record, so a model recorded without them (or with them off) is reused; on, it is rebuilt."""
    import json

    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import SETTINGS_FILE, _reusable, settings_hash, tiny_settings

    def tiny(c):
        return tiny_settings(c.env, c.tiny, c.sft, c.seed)

    plain = tiny(load_config("household-tiny"))
    assert "memory_unvisited" not in plain["env.chat"] and "memory_seen" not in plain["env.chat"]
    folder = tmp_path / "tiny_model"
    for recorded in (plain, {**plain, "env.chat": {**plain["env.chat"], "memory_unvisited": False}}):
        folder.mkdir(exist_ok=True)
        (folder / SETTINGS_FILE).write_text(json.dumps({"hash": settings_hash(recorded), "settings": recorded}))
        assert _reusable(folder, plain, "tiny model", lambda _: None)
    on = tiny(load_config("household-tiny", ["env.chat.memory_unvisited=true"]))
    assert on["env.chat"]["memory_unvisited"] is True
    assert not _reusable(folder, on, "tiny model", lambda _: None) and not folder.exists()
