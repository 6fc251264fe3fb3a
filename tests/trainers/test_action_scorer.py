"""The credit-assignment benchmark's fast controlled learner (benchmarks/learning/action_scorer.py): its
policy is a proper log-softmax over the admissible actions, and one step of the trainer's PPO
loss with a positive advantage makes the chosen action more likely."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.learning.action_scorer import ActionScorer, ScorerPolicy, chosen_logprobs, decide, make_batch  # noqa: E402

from agentgym.policies.base import TurnContext  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402
from agentgym.trainers.ppo import clip_range, ppo_clip_loss  # noqa: E402

TASK = TaskSpec("agentgym/Household-v0", params={"task_type": "pick_and_place"}, seed=0)
STATES = [
    ("put a mug in cabinet.", "You arrive at countertop 1. On the countertop 1, you see a mug 1.", "go to drawer 1",
     ["go to cabinet 1", "go to drawer 1", "take mug 1 from countertop 1", "look", "inventory"]),
    ("heat some apple and put it on diningtable.", "You are in the middle of a room.", "",
     ["go to microwave 1", "go to fridge 1", "look"]),
    ("look at book under the desklamp.", "You arrive at desk 1. On the desk 1, you see a book 1 and a desklamp 1.",
     "go to desk 1", ["take book 1 from desk 1", "use desklamp 1", "examine desk 1", "go to bed 1", "look", "inventory",
                      "go to shelf 1"]),
]


def _prompt(instruction: str, memory: str) -> list[dict]:
    text = f"Your task: {instruction}\n\nYour actions so far: {memory or 'none'}.\n\nCurrent observation (step 2):\n..."
    return [{"role": "system", "content": ""}, {"role": "user", "content": text}]


def _contexts():
    prompts, contexts = [], []
    for k, (instruction, obs, memory, actions) in enumerate(STATES):
        prompts.append(_prompt(instruction, memory))
        contexts.append(TurnContext(episode=str(k), task=TASK, turn=1, info={
            "instruction": instruction, "env_observation": obs, "admissible_actions": actions}))
    return prompts, contexts


def test_logprobs_are_a_log_softmax_over_admissible_actions():
    torch.manual_seed(0)
    scorer = ActionScorer(buckets=1 << 12, dim=8, hidden=16)
    prompts, contexts = _contexts()
    decisions = [decide(scorer, p, c, c.info["admissible_actions"]) for p, c in zip(prompts, contexts)]
    batch = make_batch(decisions)
    logp, h, e = scorer(batch)
    assert logp.shape == (sum(len(s[3]) for s in STATES),)
    assert h.shape == (len(STATES), 16) and e.shape == (len(logp), 16)
    # each state's segment is the log-softmax of the raw scores of its own actions, and nothing else
    hs = h[batch.owner]
    raw = scorer.score(torch.cat([hs, e, hs * e], -1)).squeeze(-1)
    for k, start in enumerate(batch.starts):
        seg = slice(int(start), int(start) + batch.counts[k])
        assert torch.allclose(logp[seg].exp().sum(), torch.tensor(1.0), atol=1e-5)
        assert torch.allclose(logp[seg], torch.log_softmax(raw[seg], 0), atol=1e-5)
    # the policy samples an admissible action and reports that action's log-prob
    policy = ScorerPolicy(scorer, seed=0)
    out = policy.generate(prompts, None, contexts)
    for comp, ctx, (start, count) in zip(out, contexts, zip(batch.starts, batch.counts)):
        assert comp.text in ctx.info["admissible_actions"]
        k = comp.response_ids[0]
        assert ctx.info["admissible_actions"][k] == comp.text
        assert comp.response_logprobs[0] == pytest.approx(float(logp[int(start) + k].detach()), abs=1e-5)
        assert policy.records[(ctx.episode, ctx.turn)].chosen == k


def test_one_ppo_step_with_positive_advantage_raises_the_chosen_action():
    torch.manual_seed(1)
    scorer = ActionScorer(buckets=1 << 12, dim=8, hidden=16)
    prompts, contexts = _contexts()
    decisions = [decide(scorer, p, c, c.info["admissible_actions"]) for p, c in zip(prompts, contexts)]
    for d, chosen in zip(decisions, (2, 0, 1)):  # take the mug, go to the microwave, use the lamp
        d.chosen = chosen
    with torch.no_grad():
        old, _, _ = chosen_logprobs(scorer, decisions)
    adv = torch.ones(len(decisions), 1)
    opt = torch.optim.Adam(scorer.parameters(), lr=1e-2)
    logp, _, _ = chosen_logprobs(scorer, decisions)
    lo, hi = clip_range(0.2, False)
    loss, stats = ppo_clip_loss(logp[:, None], old[:, None], adv, torch.ones_like(adv), lo, hi)
    assert stats.ratio_max == pytest.approx(1.0, abs=1e-5)  # first minibatch: ratio 1
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        new, _, _ = chosen_logprobs(scorer, decisions)
    assert np.all((new - old).numpy() > 0), (old, new)
