"""RLVMR's rules, one by one, on hand-made trajectories; the format penalty; the redundant-step rate."""

import pytest

from agentgym.errors import ConfigError
from agentgym.rewards.meta_reasoning import (MetaReasoningConfig, apply_meta_rewards, exploration_reward,
                                             format_penalty, meta_rewards, parse_tags, planning_reward,
                                             redundant_step_rate, reflection_reward)
from agentgym.trajectory import Step, Trajectory


def reply(tag, action, body="thinking"):
    return f"<{tag}>{body}</{tag}><action>{action}</action>"


def traj(steps, success=False):
    """steps: (text, action, valid, anchor)"""
    return Trajectory(task_id="t", group_id="g", success=success, score=float(success),
                      steps=[Step(observation="o", anchor=a, text=x, action=act, action_valid=v)
                             for x, act, v, a in steps])


def test_parse_tags_accepts_the_format():
    p = parse_tags(reply("planning", "go to desk 1", "first the desk, then the lamp"))
    assert p.well_formed and p.tag == "planning"
    assert parse_tags("<explore>look around</explore>\n<action>open drawer 1</action>").tag == "explore"


@pytest.mark.parametrize("text,problem", [
    ("<planning>x<action>go</action>", "opened inside"),
    ("<planning>x</planning><action>go</action></monitor>", "closes nothing"),
    ("<plan>x</plan><action>go</action>", "unknown tag"),
    ("<planning>x</planning>", "0 <action> blocks"),
    ("<action>go</action>", "0 meta-reasoning tags"),
    ("<planning>x</planning><explore>y</explore><action>go</action>", "2 meta-reasoning tags"),
    ("<planning>  </planning><action>go</action>", "is empty"),
    ("<action>go</action><reflection>x</reflection>", "after the action"),
    ("<monitor>x", "never closed"),
])
def test_malformed_replies_are_named_never_raised(text, problem):
    p = parse_tags(text)
    assert not p.well_formed and problem in p.problem
    assert format_penalty(p, 0.1) == -0.1
    assert format_penalty(parse_tags(reply("monitor", "look")), 0.1) == 0.0


def test_planning_rule():
    assert planning_reward("planning", True, True, 1.0) == 1.0
    assert planning_reward("planning", True, False, 1.0) == 0.0  # the plan led nowhere
    assert planning_reward("planning", False, True, 1.0) == 0.0  # invalid action
    assert planning_reward("explore", True, True, 1.0) == 0.0


def test_exploration_rule():
    assert exploration_reward("explore", True, "open drawer 1", {"go to desk 1"}, True, 1.0) == 1.0
    assert exploration_reward("explore", True, "go to desk 1", {"go to desk 1"}, True, 1.0) == 0.0  # a repeat
    assert exploration_reward("explore", True, "look", set(), False, 1.0) == 0.0  # state already seen
    assert exploration_reward("explore", True, "look", set(), None, 1.0) == 1.0  # last step: state unknown
    assert exploration_reward("explore", False, "fly", set(), True, 1.0) == 0.0


def test_reflection_rule():
    failed = Step(observation="o", anchor="s", action="take mug", action_valid=False)
    worked = Step(observation="o", anchor="s", action="take mug", action_valid=True)
    assert reflection_reward("reflection", True, "go to shelf 1", failed, 1.0) == 1.0
    assert reflection_reward("reflection", True, "take mug", failed, 1.0) == 0.0  # same failed action again
    assert reflection_reward("reflection", True, "go to shelf 1", worked, 1.0) == 0.0  # nothing had failed
    assert reflection_reward("reflection", True, "go", None, 1.0) == 0.0  # first step
    assert reflection_reward("monitor", True, "go", failed, 1.0) == 0.0


def test_episode_rewards_combine_the_rules():
    t = traj([(reply("planning", "go to desk 1"), "go to desk 1", True, "a"),
              (reply("explore", "open drawer 1"), "open drawer 1", True, "b"),
              (reply("explore", "take pen"), "take pen", False, "c"),  # invalid: no tag reward
              (reply("reflection", "take pen from drawer 1"), "take pen from drawer 1", True, "c"),
              ("<monitor>on track<action>look</action>", "look", True, "d"),  # malformed
              (reply("explore", "go to desk 1"), "go to desk 1", True, "e")], success=True)
    cfg = MetaReasoningConfig(planning=0.5, explore=0.3, reflection=0.7, format_penalty=0.1)
    rec = meta_rewards(t, cfg)
    assert rec.tags == ["planning", "explore", "explore", "reflection", None, "explore"]
    assert rec.rewards == pytest.approx([0.5, 0.3, 0.0, 0.7, -0.1, 0.0])  # last: a repeated action
    assert rec.malformed == 1
    counts = apply_meta_rewards([t], MetaReasoningConfig(planning=0.5, explore=0.3, reflection=0.7, weight=2.0,
                                                         episode_cap=5.0, success_reward=10.0))
    # the tag rewards moved between the steps (weight x (g - mean g), mean 0.25), the format penalty a cost
    assert [s.reward for s in t.steps] == pytest.approx([0.5, 0.1, -0.5, 0.9, -0.7, -0.5])
    assert sum(s.reward for s in t.steps) == pytest.approx(-0.2)  # the episode earns only its penalty
    assert counts["tag_explore"] == 3 and counts["malformed"] == 1
    assert t.metadata["meta_reasoning"]["tags"][0] == "planning"


def test_exploration_needs_a_new_state():
    t = traj([(reply("explore", "look"), "look", True, "a"), (reply("explore", "inventory"), "inventory", True, "a"),
              (reply("explore", "go to desk 1"), "go to desk 1", True, "a"), ("x", "y", True, "b")])
    rec = meta_rewards(t, MetaReasoningConfig(format_penalty=0.0))
    assert rec.rewards[:3] == [0.0, 0.0, 1.0]  # idling leaves the state as it was; moving reaches b


def test_config_and_redundant_rate():
    with pytest.raises(ConfigError, match="weight"):
        MetaReasoningConfig(weight=-1)
    t = traj([("", "look", True, "a"), ("", "look", True, "a"), ("", "go", True, "b"), ("", "back", True, "a"),
              ("", "x", True, "c")])
    assert redundant_step_rate([t]) == pytest.approx(2 / 4)  # a->a and b->a


def test_the_chat_layers_action_parser_reads_tagged_replies():
    from agentgym.parsing import TagActionParser

    parsed = TagActionParser().parse(reply("planning", "go to desk 1", "the mug is likely on the desk"))
    assert parsed.action == "go to desk 1" and parsed.error is None


def test_a_well_formed_monitor_step_is_parsed_counted_and_earns_nothing():
    """RLVMR's monitor rule through meta_rewards: a well-formed <monitor> step is no format slip and
    is counted as a monitor tag, but earns no tag reward (the paper's code gives it none), even
    where every other rule would pay: a valid new action reaching a new state, after a failed
    step, in a successful episode. The same step tagged explore, planning or reflection does pay."""
    def episode(tag):
        return traj([(reply("explore", "take pen"), "take pen", False, "a"),  # a failed step first
                     (reply(tag, "open drawer 1", "is the plan on track?"), "open drawer 1", True, "a"),
                     (reply("planning", "take pen from drawer 1"), "take pen from drawer 1", True, "b")], success=True)

    cfg = MetaReasoningConfig(planning=0.5, explore=0.3, reflection=0.7, format_penalty=0.1)
    t = episode("monitor")
    assert parse_tags(t.steps[1].text).well_formed
    rec = meta_rewards(t, cfg)
    assert rec.tags[1] == "monitor" and rec.problems[1] == "" and rec.malformed == 0
    assert rec.rewards[1] == 0.0  # no tag reward and no format penalty
    for tag, paid in (("explore", 0.3), ("planning", 0.5), ("reflection", 0.7)):
        assert meta_rewards(episode(tag), cfg).rewards[1] == pytest.approx(paid)
    counts = apply_meta_rewards([t], cfg)
    assert counts["tag_monitor"] == 1 and counts["malformed"] == 0
    # earning nothing of its own, it is credited the same as the other step that earned nothing (the slip)
    assert t.steps[1].reward == pytest.approx(t.steps[0].reward)
    assert t.steps[1].reward < 0 < t.steps[2].reward
    assert t.metadata["meta_reasoning"]["tags"][1] == "monitor"
