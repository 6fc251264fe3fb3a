"""Rewards as a layer over any env: rubrics, judge models, relative (group) judges, generated rubrics,
hacking guards, RLVMR's meta-reasoning rewards and SWE-RL's patch similarity.

    from agentgym.rewards import make_reward, apply_reward
    reward = make_reward({"kind": "rubric", "criteria": [
        {"name": "total", "weight": 2, "description": "States the total", "check": "contains:$84.20"},
        {"name": "tone", "weight": 1, "description": "Reads as a short note to the user"}]},
        judge_policy=policy)
    stats = apply_reward(trajectories, reward, how="replace")   # the env's score kept as verifiable_score

In a training config: `env.reward: {kind: rubric, criteria: [...], judge: {...}, combine: replace}`.
Kinds (REWARD_KINDS, extend with register_reward): rubric, judge, relative_judge. A judge is a
language-model policy (HF, vLLM, OpenAI-compatible, or any object whose generate(prompts, sampling)
answers chat prompts; a test's scripted judge is one), built by the caller and passed in.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from agentgym.errors import ConfigError
from agentgym.policies.base import SamplingParams
from agentgym.rewards.base import (COMBINE, NO_VERDICT, FunctionReward, Reward, RewardStats, Verdict, apply_reward,
                                   as_verdict, combine)
from agentgym.rewards.generation import RubricStore, generate_rubrics, parse_rubric
from agentgym.rewards.guards import Guarded, divergence, final_answer
from agentgym.rewards.judge import JudgeCache, JudgeReward, parse_score, render_episode
from agentgym.rewards.relative import RelativeJudge, parse_group_scores
from agentgym.rewards.rubric import Criterion, Rubric, mentions
from agentgym.trajectory import Trajectory

RewardFactory = Callable[..., Reward]
REWARD_KINDS: dict[str, RewardFactory] = {}


def register_reward(kind: str, factory: RewardFactory, overwrite: bool = False) -> RewardFactory:
    """factory(spec: dict, judge_policy) -> Reward."""
    if kind in REWARD_KINDS and REWARD_KINDS[kind] is not factory and not overwrite:
        raise ConfigError(f"a reward kind named {kind!r} is already registered: pick another name")
    REWARD_KINDS[kind] = factory
    return factory


def declarative_check(rule: str) -> Callable[[Trajectory], Any]:
    """A check a YAML file can hold: 'contains:<text>' (as whole words, case-insensitive),
    'excludes:<text>' (its negation: a distractor), 'regex:<pattern>', 'max_chars:<n>', each on
    the episode's final answer; or 'success' (the env's own verdict). A contains: check alone
    cannot tell a report from a list of every candidate value: pair it with excludes: distractors
    or a max_chars bound marked `gate: true` (docs/rewards.md)."""
    kind, _, arg = rule.partition(":")
    if kind == "contains" and arg:
        return lambda t: mentions(final_answer(t), arg)
    if kind == "excludes" and arg:
        return lambda t: not mentions(final_answer(t), arg)
    if kind == "regex" and arg:
        try:
            pattern = re.compile(arg, re.S)
        except re.error as exc:
            raise ConfigError(f"rubric check {rule!r} is not a valid regular expression: {exc}") from None
        return lambda t: bool(pattern.search(final_answer(t)))
    if kind == "max_chars" and arg.isdigit():
        return lambda t: len(final_answer(t)) <= int(arg)
    if kind == "success":
        return lambda t: bool(t.metadata.get("verifiable_success", t.success))
    raise ConfigError(f"rubric check {rule!r} is unknown: use contains:<text>, excludes:<text>, regex:<pattern>, "
                      "max_chars:<n> or success")


def _judge(spec: dict, judge_policy: Any) -> JudgeReward:
    opts = dict(spec.get("judge") or {})
    known = {"criterion", "name", "timeout_s", "max_chars_per_turn"}
    unknown = set(opts) - known - {"cache", "policy", "max_new_tokens"}
    if unknown:
        have = ", ".join(sorted(known | {"cache", "policy", "max_new_tokens"}))
        raise ConfigError(f"unknown judge option {sorted(unknown)[0]!r}: use {have}")
    cache = JudgeCache(opts.pop("cache", None))
    policy_name, max_new = opts.pop("policy", None), opts.pop("max_new_tokens", None)
    extra = {}
    if max_new is not None:
        if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
            raise ConfigError(f"judge max_new_tokens={max_new!r} must be a positive whole number")
        extra["sampling"] = SamplingParams(temperature=0.0, max_new_tokens=max_new)
    if judge_policy is None:
        # a training config's judge.policy is loaded by the trainer (trainers/run_setup.py:load_judge), which
        # passes it here; rewards sit below the policies they could be judged by
        where = "pass judge_policy= to make_reward" if policy_name is not None else \
            "configure one (env.reward.judge.policy: hf:PATH or openai:URL:MODEL) or use checks only"
        raise ConfigError(f"this reward asks a judge model: {where}")
    if getattr(judge_policy, "acts_on_contexts", False):
        raise ConfigError(f"{type(judge_policy).__name__} acts on an env's admissible actions and cannot judge: "
                          "judge with a language model (hf:PATH, openai:URL:MODEL, or any policy "
                          "whose generate(prompts, sampling) answers chat prompts)")
    return JudgeReward(judge_policy, cache=cache, **extra, **{k: v for k, v in opts.items() if k in known})


def _rubric(spec: dict, judge_policy: Any = None) -> Reward:
    rows = spec.get("criteria") or []
    criteria = []
    for row in rows:
        if not isinstance(row, dict) or not {"name", "weight", "description"} <= set(row):
            raise ConfigError(f"rubric criterion {row!r} needs name, weight and description")
        check = declarative_check(row["check"]) if row.get("check") else None
        gate = row.get("gate", False)
        if not isinstance(gate, bool):
            raise ConfigError(f"rubric criterion {row.get('name')!r} has gate={gate!r}: use true or false")
        criteria.append(Criterion(str(row["name"]), row["weight"], str(row["description"]), check, gate=gate))
    needs_judge = any(c.check is None for c in criteria)
    judge = _judge(spec, judge_policy) if needs_judge else None
    return _guarded(Rubric(criteria, judge=judge), spec)


def _judge_reward(spec: dict, judge_policy: Any = None) -> Reward:
    return _guarded(_judge(spec, judge_policy), spec)


def _relative(spec: dict, judge_policy: Any = None) -> Reward:
    return _guarded(RelativeJudge(_judge(spec, judge_policy)), spec)


def _guarded(reward: Reward, spec: dict) -> Reward:
    guard = spec.get("guard") or {}
    if not guard:
        return reward
    unknown = set(guard) - {"max_chars", "pattern", "floor"}
    if unknown:
        raise ConfigError(f"unknown guard option {sorted(unknown)[0]!r}: use max_chars, pattern, floor")
    return Guarded(reward, **guard)


register_reward("rubric", _rubric)
register_reward("judge", _judge_reward)
register_reward("relative_judge", _relative)

SPEC_KEYS = {"kind", "criteria", "judge", "guard", "combine", "weight"}


def make_reward(spec: dict | str, judge_policy: Any = None) -> Reward:
    """A Reward from its config: {kind: ..., ...} or just the kind's name."""
    spec = {"kind": spec} if isinstance(spec, str) else dict(spec)
    kind = spec.get("kind")
    if kind not in REWARD_KINDS:
        raise ConfigError(f"unknown reward kind {kind!r}: choose one of {', '.join(sorted(REWARD_KINDS))}")
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ConfigError(f"unknown reward option {sorted(unknown)[0]!r}: use {', '.join(sorted(SPEC_KEYS))}")
    if spec.get("combine", "replace") not in COMBINE:
        raise ConfigError(f"unknown reward combination {spec['combine']!r}: use one of {', '.join(COMBINE)}")
    return REWARD_KINDS[kind](spec, judge_policy)


__all__ = ["COMBINE", "Criterion", "FunctionReward", "Guarded", "JudgeCache", "JudgeReward", "NO_VERDICT",
           "REWARD_KINDS", "RelativeJudge", "Reward", "RewardStats", "Rubric", "RubricStore", "Verdict",
           "apply_reward", "as_verdict", "combine", "declarative_check", "divergence", "final_answer",
           "generate_rubrics", "make_reward", "mentions", "parse_group_scores", "parse_rubric", "parse_score",
           "register_reward", "render_episode"]
