"""sft.filter_success: the default keeps today's behaviour (successful demonstrations only),
false keeps failed ones too, and anything but a boolean is one line at config load."""

from __future__ import annotations

import pytest

from agentgym.errors import ConfigError
from agentgym.trainers.checks import check_sft
from agentgym.trainers.config import TrainConfig, load_config


def test_default_is_todays_filtering():
    assert TrainConfig().sft.filter_success is True
    assert load_config("household-tiny", []).sft.filter_success is True
    assert load_config("household-tiny", ["sft.filter_success=false"]).sft.filter_success is False


@pytest.mark.parametrize("value", ["1", "'yes please'", "0.5", "null", "[true]"])
def test_non_boolean_is_one_line_at_load(value):
    with pytest.raises(ConfigError, match="sft.filter_success") as info:
        load_config("household-tiny", [f"sft.filter_success={value}"])
    assert "\n" not in str(info.value)


def test_non_boolean_set_in_code_is_refused_by_check_sft():
    cfg = TrainConfig()
    cfg.sft.filter_success = "false"  # truthy text: would silently filter
    with pytest.raises(ConfigError, match="sft.filter_success must be true or false, got 'false'"):
        check_sft(cfg)


def test_tagged_demonstrations_need_the_tag_parser_in_check_sft():
    """The rule spans sft and env.chat, so it lives with the other cross-section rules: a config
    built in code meets it too, and the parser setting alone (no tagged SFT) is never refused."""
    cfg = TrainConfig()
    cfg.sft.enabled, cfg.sft.tags, cfg.env.chat.parser = True, True, "raw"
    with pytest.raises(ConfigError, match=r"sft.tags=true writes .* set env.chat.parser=tag \(not raw\)"):
        check_sft(cfg)
    cfg.env.chat.parser = "tag"
    check_sft(cfg)
    cfg.sft.tags, cfg.env.chat.parser = False, "raw"
    check_sft(cfg)


def test_unfiltered_demonstrations_keep_the_failures():
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories

    cfg = load_config("household-tiny", [])
    tasks = get_task_space(cfg.env.id).split("train")[:12]
    kwargs = dict(env_id=cfg.env.id, tasks=tasks, chat=cfg.env.chat, env_kwargs=cfg.env.env_kwargs, seed=3,
                  search=True, dawdle_prob=0.6)
    every = oracle_trajectories(**kwargs, filter_success=False)
    kept = oracle_trajectories(**kwargs)
    assert len(every) == len(tasks)
    assert any(not t.success for t in every)  # an idling demonstrator at the 12-step limit fails some
    assert [t.task_id for t in kept] == [t.task_id for t in every if t.success]


@pytest.mark.parametrize("filter_success", [True, False])
def test_no_demonstration_to_imitate_is_one_line_not_a_silent_nan(filter_success, tiny_policy_factory, monkeypatch):
    """The demonstrator reaching no goal (episodes cut short) left SFT with no sample: it ran no step,
    logged "loss nan" and RL started from the untrained model. Now it is one line that says what to do."""
    from agentgym.trainers import sft

    monkeypatch.setattr(sft, "oracle_trajectories", lambda *args, **kwargs: [])  # what it keeps of failed episodes
    cfg = load_config("household-tiny", ["sft.num_tasks=2", f"sft.filter_success={str(filter_success).lower()}"])
    with pytest.raises(ConfigError, match="sft: nothing to imitate") as info:
        sft.run_sft(tiny_policy_factory(), cfg.sft, cfg.env, seed=0, session=None)
    message = str(info.value)
    assert "\n" not in message and "sft.enabled=false" in message
    assert ("sft.filter_success=false" in message) is filter_success


def test_an_episode_cap_the_demonstrator_cannot_finish_in_is_refused_before_training(tiny_policy_factory):
    from agentgym.trainers import sft

    cfg = load_config("household-tiny", ["sft.num_tasks=2", "env.env_kwargs.max_episode_steps=1"])
    with pytest.raises(ConfigError, match="reached the goal on none of the 2 training tasks"):
        sft.run_sft(tiny_policy_factory(), cfg.sft, cfg.env, seed=0, session=None)
