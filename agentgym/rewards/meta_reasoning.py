"""RLVMR's verifiable meta-reasoning rewards (Zhang et al. 2025, "RLVMR: Reinforcement Learning with
Verifiable Meta-Reasoning Rewards for Robust Long-Horizon Agents", arXiv 2507.22844).

The agent opens each reply with one of four tags, then its action:

    <planning>...</planning> | <explore>...</explore> | <reflection>...</reflection> | <monitor>...</monitor>
    <action>...</action>

and a tagged step earns a reward when a rule over the env's own info says the behaviour helped.
Each rule is a pure function of what one step shows (the rules follow the paper and its public code):

- planning:   the episode succeeded (a plan that led somewhere);
- explore:    the action was not taken before in the episode and, where the next state is known
              (its `anchor`), that state is one the episode had not seen;
- reflection: the previous action failed (`action_valid` False) and this one differs from it;
- monitor:    no reward (the paper's code gives it none; the tag is still parsed and counted);
- format:     a reply whose tags are unbalanced, unknown, missing, repeated or after the action
              costs `format_penalty` (counted, never an exception).

Only steps whose action was valid earn tag rewards. `apply_meta_rewards` adds weight * r_t to each
step's env reward, so an estimator with step returns (GiGPO, GAE) credits the step itself; the
episode outcome (score, success) is left as the env gave it.

The outcome must dominate: the rules reward behaviours a policy can repeat without solving anything
(fail on purpose, then "reflect"; try one new idle action after another, "exploring"), and at one
reward per tagged step a 30-step episode of that paid 15-22 against 6.6 for an honest solve. So an
episode's positive meta rewards together add at most `episode_cap` (0.5 by default; it must stay
below `success_reward`, what the env pays for a success: 1.0 in every agentgym env): past the cap
they are scaled down, step by step in proportion, and no failing episode can earn what a success
does. Format penalties are not capped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Sequence

from agentgym.errors import ConfigError
from agentgym.trajectory import Step, Trajectory

TAGS = ("planning", "explore", "reflection", "monitor")
KNOWN = set(TAGS) | {"action"}
_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_-]*)>")


@dataclass(frozen=True)
class TagParse:
    tag: str | None  # the meta-reasoning tag of the reply, when there is exactly one
    well_formed: bool
    problem: str = ""


def parse_tags(text: str) -> TagParse:
    """The reply's meta-reasoning tag and whether the reply follows the format: exactly one non-empty
    meta tag, closed, before exactly one <action>...</action>, and no other tags."""
    text = text or ""
    stack: list[str] = []
    opened: list[tuple[str, int, int]] = []  # (name, start of its content, end of its content)
    starts: dict[str, int] = {}
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if name not in KNOWN:
            return TagParse(None, False, f"unknown tag <{m.group(1)}{name}>")
        if not closing:
            if stack:
                return TagParse(None, False, f"<{name}> opened inside <{stack[-1]}>")
            stack.append(name)
            starts[name] = m.end()
        else:
            if not stack or stack[-1] != name:
                return TagParse(None, False, f"</{name}> closes nothing")
            stack.pop()
            opened.append((name, starts[name], m.start()))
    if stack:
        return TagParse(None, False, f"<{stack[-1]}> is never closed")
    meta = [o for o in opened if o[0] in TAGS]
    actions = [o for o in opened if o[0] == "action"]
    if len(actions) != 1:
        return TagParse(None, False, f"{len(actions)} <action> blocks (one needed)")
    if len(meta) != 1:
        return TagParse(None, False, f"{len(meta)} meta-reasoning tags (one of {', '.join(TAGS)} needed)")
    name, a, b = meta[0]
    if not text[a:b].strip():
        return TagParse(name, False, f"<{name}> is empty")
    if a > actions[0][1]:
        return TagParse(name, False, f"<{name}> comes after the action")
    return TagParse(name, True)


# --- the rules: one small pure function each -------------------------------------------------------
def planning_reward(tag: str | None, valid: bool, success: bool, coef: float) -> float:
    return coef if tag == "planning" and valid and success else 0.0


def exploration_reward(tag: str | None, valid: bool, action: str | None, earlier_valid_actions: set,
                       reached_new_state: bool | None, coef: float) -> float:
    """reached_new_state: None where the next state is not known (the last step)."""
    if tag != "explore" or not valid or action in earlier_valid_actions:
        return 0.0
    return 0.0 if reached_new_state is False else coef


def reflection_reward(tag: str | None, valid: bool, action: str | None, previous: Step | None, coef: float) -> float:
    if tag != "reflection" or not valid or previous is None:
        return 0.0
    return coef if not previous.action_valid and action != previous.action else 0.0


def format_penalty(parsed: TagParse, coef: float) -> float:
    return 0.0 if parsed.well_formed else -coef


@dataclass
class MetaReasoningConfig:
    planning: float = 1.0
    explore: float = 1.0
    reflection: float = 1.0
    format_penalty: float = 0.1  # the paper's runs charge 0.1 for a reply that breaks the format
    weight: float = 1.0  # lambda: r_t += weight * r_meta_t
    episode_cap: float = 0.5  # the most an episode's weighted positive meta rewards add, together
    success_reward: float = 1.0  # what the env pays for a success; episode_cap must stay below it

    def __post_init__(self) -> None:
        for name in ("planning", "explore", "reflection", "format_penalty", "weight", "episode_cap", "success_reward"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"meta-reasoning option {name}={value!r} must be a finite number >= 0")
        if not self.episode_cap < self.success_reward:
            raise ConfigError(f"meta-reasoning episode_cap={self.episode_cap} must be below success_reward="
                              f"{self.success_reward}: else a policy that games the tags out-earns one that solves")


@dataclass
class MetaRecord:
    tags: list = field(default_factory=list)  # per step: the tag or None
    rewards: list = field(default_factory=list)  # per step: r_meta_t (before the weight)
    malformed: int = 0
    problems: list = field(default_factory=list)  # per step: "" or what broke the format


def meta_rewards(traj: Trajectory, cfg: MetaReasoningConfig) -> MetaRecord:
    rec = MetaRecord()
    earlier: set = set()
    seen = set()
    steps = traj.steps
    for t, step in enumerate(steps):
        parsed = parse_tags(step.text)
        seen.add(step.anchor)
        reached = steps[t + 1].anchor if t + 1 < len(steps) else None
        new_state = None if reached is None else reached not in seen
        r = format_penalty(parsed, cfg.format_penalty)
        r += planning_reward(parsed.tag, step.action_valid, bool(traj.success), cfg.planning)
        r += exploration_reward(parsed.tag, step.action_valid, step.action, earlier, new_state, cfg.explore)
        r += reflection_reward(parsed.tag, step.action_valid, step.action, steps[t - 1] if t else None, cfg.reflection)
        if step.action_valid:
            earlier.add(step.action)
        rec.tags.append(parsed.tag)
        rec.rewards.append(r)
        rec.problems.append(parsed.problem)
        rec.malformed += not parsed.well_formed
    return rec


def capped(rewards: Sequence[float], weight: float, cap: float) -> list[float]:
    """weight * r_t per step, the positive ones scaled down together so they add at most `cap`."""
    weighted = [weight * r for r in rewards]
    gained = sum(r for r in weighted if r > 0)
    scale = min(1.0, cap / gained) if gained > 0 else 1.0
    return [r * scale if r > 0 else r for r in weighted]


def apply_meta_rewards(trajectories: Sequence[Trajectory], cfg: MetaReasoningConfig | None = None) -> dict:
    """Add weight * r_meta to every step's reward, in place; the tags and rewards are kept in
    `metadata["meta_reasoning"]` (the viewer's record). Returns counts for the logs."""
    cfg = cfg or MetaReasoningConfig()
    counts = {f"tag_{name}": 0 for name in TAGS}
    counts.update(malformed=0, steps=0, meta_reward_sum=0.0)
    for traj in trajectories:
        if traj.infra_error:
            continue
        rec = meta_rewards(traj, cfg)
        added = capped(rec.rewards, cfg.weight, cfg.episode_cap)
        for step, r in zip(traj.steps, added):
            step.reward += r
        traj.metadata["meta_reasoning"] = {"tags": rec.tags, "rewards": rec.rewards, "added": added,
                                           "problems": rec.problems}
        for tag in rec.tags:
            if tag:
                counts[f"tag_{tag}"] += 1
        counts["malformed"] += rec.malformed
        counts["steps"] += len(traj.steps)
        counts["meta_reward_sum"] += sum(added)
    return counts


# --- a demonstrator's tags (sft.tags) ---------------------------------------------------------------
# A tagged warm start copies replies `<tag>note</tag><action>...</action>`: the tag picked by rule
# from what the demonstrator does, and a short fixed note per tag (the format needs a non-empty tag;
# a tiny model copies a few words, and RL then changes which tag it writes, not what it says).
DEMO_NOTES = {"planning": "next step", "explore": "new place", "reflection": "last failed", "monitor": "check"}
# every tag string a tagged reply holds: a tiny model's tokenizer keeps each as one token
TAG_STRINGS = tuple(s for name in (*TAGS, "action") for s in (f"<{name}>", f"</{name}>"))


def demonstration_tag(kind: str, after_failure: bool) -> str:
    """The tag of a demonstrator's step. `kind` is what the env's task space says the command does
    (`meta_tag(action, earlier_actions)`: explore for a first visit or look inside, monitor for a
    command that changes nothing, planning for a step of the plan); on the turn after a failed
    action (a slip, `action_valid` False) the step is a reflection, as RLVMR's reflection follows
    an error and changes the action."""
    if kind not in TAGS:
        raise ValueError(f"meta-reasoning tag {kind!r} is not one of {', '.join(TAGS)}")
    return "reflection" if after_failure else kind


def tagged_reply(tag: str, action_text: str) -> str:
    """A demonstrator's reply: the tag with its note, then the action as the parser writes it."""
    return f"<{tag}>{DEMO_NOTES[tag]}</{tag}>{action_text}"


def redundant_step_rate(trajectories: Sequence[Trajectory]) -> float:
    """Share of steps after which the episode is in a state it had already been in (the anchor
    repeats): idling (look, inventory), undoing, going back and forth. The last step's next state
    is unknown and not counted."""
    redundant = total = 0
    for traj in trajectories:
        if traj.infra_error:
            continue
        seen = set()
        for t, step in enumerate(traj.steps[:-1]):
            seen.add(step.anchor)
            total += 1
            redundant += traj.steps[t + 1].anchor in seen
    return redundant / total if total else 0.0
