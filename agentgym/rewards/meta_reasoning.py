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

Only well-formed steps whose action was valid earn tag rewards.

The rules pay for behaviours a policy can repeat without solving anything (fail on purpose, then
"reflect"; pad a solved episode with planning-tagged idle steps; wander "exploring"). Added to the
env's reward, at any coefficient and under any cap, some such strategy out-earns an honest solve:
uncapped, reflection farming paid 15 per episode against 6.6 for a solve; capped at 0.5, it still
paid 0.5 with no success, and 15 idle steps added to a solve paid 1.5 against an honest 1.45. So the
tag rewards never change what an episode earns: they move credit between its steps.
`apply_meta_rewards` adds to each step's reward

    weight * ((g_t - mean_t g) * s  +  p_t * c)

where g_t is the step's tag reward, the mean is over the episode's steps (the sum of the first term
is 0), s <= 1 scales the credit moved so that its positive part is at most `episode_cap`, and p_t
<= 0 is the format penalty, a cost (c <= 1 scales the costs to at most `episode_cap` together). An episode's
return is then the env's outcome minus at most `episode_cap` of format penalties: whatever its tags,
no episode earns more than the env paid it, and a success always earns more than a failure. Inside an episode, a step whose behaviour the rules verify
(a reflection that recovers from a slip, an exploration that reaches a new state) is credited
above the episode's other steps, and a slip, idling or a malformed reply below them, which an
estimator with step returns (GiGPO's step part, GAE) turns into step advantages. `episode_cap` stays
below `success_reward` (1.0 in every agentgym env): no step's meta credit outweighs the outcome.
RLVMR's public code makes the tag rewards relative too (normalised within each (group, tag) set of
steps) and adds them at the advantage; here they are relative within the episode and go through
the step returns.
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
    weight: float = 1.0  # lambda: r_t += weight * ((g_t - mean g) + p_t), each part scaled to episode_cap
    episode_cap: float = 0.5  # the most credit the tag rewards move within an episode (their positive part)
    success_reward: float = 1.0  # what the env pays for a success; episode_cap must stay below it

    def __post_init__(self) -> None:
        for name in ("planning", "explore", "reflection", "format_penalty", "weight", "episode_cap", "success_reward"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"meta-reasoning option {name}={value!r} must be a finite number >= 0")
        if not self.episode_cap < self.success_reward:
            raise ConfigError(f"meta-reasoning episode_cap={self.episode_cap} must be below success_reward="
                              f"{self.success_reward}: the credit the tags move must not outweigh the outcome")


@dataclass
class MetaRecord:
    tags: list = field(default_factory=list)  # per step: the tag or None
    rewards: list = field(default_factory=list)  # per step: g_t + p_t, the rules' own reward (before the weight)
    gains: list = field(default_factory=list)  # per step: g_t, the tag reward
    penalties: list = field(default_factory=list)  # per step: p_t, the format penalty (<= 0)
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
        tag = parsed.tag if parsed.well_formed else None  # a malformed reply earns no tag reward
        gain = planning_reward(tag, step.action_valid, bool(traj.success), cfg.planning)
        gain += exploration_reward(tag, step.action_valid, step.action, earlier, new_state, cfg.explore)
        gain += reflection_reward(tag, step.action_valid, step.action, steps[t - 1] if t else None, cfg.reflection)
        penalty = format_penalty(parsed, cfg.format_penalty)
        if step.action_valid:
            earlier.add(step.action)
        rec.tags.append(parsed.tag)
        rec.gains.append(gain)
        rec.penalties.append(penalty)
        rec.rewards.append(gain + penalty)
        rec.problems.append(parsed.problem)
        rec.malformed += not parsed.well_formed
    return rec


def _at_most(values: list[float], total: float) -> list[float]:
    """`values` scaled down together so that the sum of their magnitudes (positive parts, for a
    list that sums to 0) is at most `total`."""
    size = sum(v for v in values if v > 0) or -sum(values)
    return values if size <= total else [v * total / size for v in values]


def credited(gains: Sequence[float], penalties: Sequence[float], weight: float, cap: float) -> list[float]:
    """What each step's reward gains: weight * (g_t - mean g), scaled down together so that the
    positive part adds at most `cap` (the sum stays 0: credit moves between the steps, the episode
    earns nothing), plus weight * p_t, the format penalty (together at most `cap`: the outcome dominates)."""
    if not gains:
        return []
    mean = sum(gains) / len(gains)
    moved = _at_most([weight * (g - mean) for g in gains], cap)
    costs = _at_most([weight * p for p in penalties], cap)
    return [m + p for m, p in zip(moved, costs)]


def apply_meta_rewards(trajectories: Sequence[Trajectory], cfg: MetaReasoningConfig | None = None) -> dict:
    """Add each step's meta credit (`credited`) to its reward, in place; the tags and rewards are
    kept in `metadata["meta_reasoning"]` (the viewer's record). Returns counts for the logs."""
    cfg = cfg or MetaReasoningConfig()
    counts = {f"tag_{name}": 0 for name in TAGS}
    # meta_reward_sum: what the meta rewards added to the episodes' returns (the format penalties alone);
    # meta_credit_moved: the credit they moved between steps (the positive part, per episode at most episode_cap)
    counts.update(malformed=0, steps=0, meta_reward_sum=0.0, meta_credit_moved=0.0)
    for traj in trajectories:
        if traj.infra_error:
            continue
        rec = meta_rewards(traj, cfg)
        added = credited(rec.gains, rec.penalties, cfg.weight, cfg.episode_cap)
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
        counts["meta_credit_moved"] += sum(max(a - p, 0.0) for a, p in zip(added, rec.penalties))
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
