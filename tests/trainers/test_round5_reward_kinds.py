"""Round 5 (issue 67 item 13): `env.reward={kind: judge}` in `agentgym train` crashed at the first
iteration (AttributeError: 'function' object has no attribute 'cache', rewards/hook.py). One short
iteration is trained here with each reward kind, the judged ones asking a real model (the toy's
tiny model, as `env.reward.judge.policy: hf:PATH` names it)."""

from __future__ import annotations

import json
import math

import pytest

KINDS = {
    "meta_reasoning": {"kind": "meta_reasoning"},
    "rubric (checks only)": {"kind": "rubric", "criteria": [
        {"name": "took", "weight": 1, "description": "the key was taken", "check": "success"}]},
    "rubric with a judge": {"kind": "rubric", "criteria": [
        {"name": "took", "weight": 1, "description": "the key was taken", "check": "success"},
        {"name": "tidy", "weight": 1, "description": "the agent walked straight to the key"}]},
    "judge": {"kind": "judge", "judge": {"criterion": "The agent took the key."}},
    "relative_judge": {"kind": "relative_judge", "judge": {"criterion": "The agent took the key."}},
}


@pytest.mark.parametrize("name", list(KINDS))
def test_round5_one_iteration_trains_with_each_reward_kind(name, tmp_path, toy_config, tiny_model_dir):
    """Round 5, item 13: kind judge crashed at the first iteration; every kind trains an iteration
    and logs its reward metrics (the judged kinds: the judge's cache and counters)."""
    from agentgym.trainers.training import train

    spec = dict(KINDS[name])
    if "judge" in spec or any("check" not in c for c in spec.get("criteria", [])):
        spec["judge"] = {**spec.get("judge", {}), "policy": f"hf:{tiny_model_dir}", "max_new_tokens": 4}
    cfg = toy_config(tmp_path, tiny_model_dir, "iterations=1", "checkpoint_every=0", "eval.num_tasks=1")
    cfg.env.reward = spec
    summary = train(cfg, log=lambda _: None)
    assert summary["iterations"] == 1
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    reward = next(r for r in rows if "reward/episodes" in r or "reward/steps" in r)
    if name == "meta_reasoning":
        assert reward["reward/steps"] > 0
    else:
        assert reward["reward/episodes"] == 4 and reward["reward/judged"] + reward["reward/no_verdict"] == 4
    if "judge" in spec:
        assert reward["reward/judge_prompts"] >= 1 and math.isfinite(reward["reward/judge_cache_hit_rate"])
