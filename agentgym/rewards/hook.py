"""`env.reward` of a training config turned into what the trainer calls after each rollout.

    env.reward: patch_similarity                                  # a string: the env's own reward mode
    env.reward: {kind: rubric, criteria: [...], judge: {policy: "hf:PATH", max_new_tokens: 128}, combine: replace, weight: 0.5}
    env.reward: {kind: meta_reasoning, planning: 1.0, explore: 1.0, reflection: 1.0, format_penalty: 0.1, weight: 1.0,
                 episode_cap: 0.5}

`env_reward_kwargs(spec)` gives the env keyword for a string (SWE-v0: reward=patch_similarity|tests|both);
`reward_hook(spec, judge_policy)` gives `hook(trajectories) -> metrics` for a mapping, which rewrites the
episodes' outcomes (judged kinds, through apply_reward) or step rewards (meta_reasoning) in place,
before the advantages are computed. Both refuse a bad spec in one line.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from agentgym.errors import ConfigError
from agentgym.rewards.meta_reasoning import MetaReasoningConfig, apply_meta_rewards, redundant_step_rate
from agentgym.trajectory import Trajectory
from agentgym.rewards import Guarded, JudgeReward, apply_reward, make_reward

Hook = Callable[[Sequence[Trajectory]], dict]


def env_reward_kwargs(spec: Any) -> dict:
    """{"reward": spec} when env.reward names the env's own reward mode, else {}."""
    return {"reward": spec} if isinstance(spec, str) and spec else {}


def _weight(value: Any) -> float:
    """env.reward.weight: a finite number >= 0 (a negative one would pay for failing)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"env.reward.weight={value!r} must be a number >= 0 (how much of the judged reward counts)")
    return float(value)


def judge_of(reward: Any) -> JudgeReward | None:
    """The JudgeReward inside a reward (a judge itself, a rubric's or a relative judge's, under guards),
    whose cache and counters the logs report; None for a reward that asks no judge."""
    while isinstance(reward, Guarded):
        reward = reward.reward
    if isinstance(reward, JudgeReward):
        return reward
    inner = getattr(reward, "judge", None)  # Rubric.judge, RelativeJudge.judge: a JudgeReward or None
    return inner if isinstance(inner, JudgeReward) else None


def reward_hook(spec: Any, judge_policy: Any = None) -> Hook | None:
    if spec is None or isinstance(spec, str):
        return None
    if not isinstance(spec, dict):
        raise ConfigError(f"env.reward must be a reward mode name or a mapping with a kind, got {spec!r}")
    if spec.get("kind") == "meta_reasoning":
        opts = {k: v for k, v in spec.items() if k != "kind"}
        try:
            cfg = MetaReasoningConfig(**opts)
        except TypeError:
            known = "planning, explore, reflection, format_penalty, weight, episode_cap, success_reward"
            raise ConfigError(f"unknown meta_reasoning option in {sorted(opts)}: use {known}") from None

        def meta(trajectories: Sequence[Trajectory]) -> dict:
            counts = apply_meta_rewards(trajectories, cfg)
            return {**counts, "redundant_step_rate": redundant_step_rate(trajectories)}

        return meta

    reward = make_reward(spec, judge_policy)
    how, weight = spec.get("combine", "replace"), _weight(spec.get("weight", 0.5))

    def judged(trajectories: Sequence[Trajectory]) -> dict:
        out = apply_reward(trajectories, reward, how, weight).as_dict()
        judge = judge_of(reward)
        if judge is not None:
            out["judge_cache_hit_rate"] = judge.cache.hit_rate
            out.update({f"judge_{k}": v for k, v in judge.stats.as_dict().items()})
        return out

    return judged
