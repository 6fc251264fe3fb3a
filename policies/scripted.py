"""Scripted policies: uniform random over admissible actions, and the env family's oracle."""

from __future__ import annotations

import numpy as np

from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext


def _format(ctx: TurnContext, action: str) -> str:
    return ctx.format_action(action) if ctx.format_action else action


class RandomPolicy:
    """Picks uniformly among `info["admissible_actions"]`; with an open action space, writes a
    random short string (which the env will mostly reject: a lower bound for any agent)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        if contexts is None:
            raise ValueError("RandomPolicy needs the rollout contexts (admissible actions)")
        out = []
        for ctx in contexts:
            actions = ctx.info.get("admissible_actions")
            if actions:
                action = actions[int(self.rng.integers(len(actions)))]
            else:
                letters = self.rng.choice(list("abcdefghijklmnopqrstuvwxyz "), size=int(self.rng.integers(1, 12)))
                action = "".join(letters).strip() or "look"
            out.append(Completion(text=_format(ctx, action)))
        return out


class OraclePolicy:
    """Replays the task space's oracle plan. Environments are deterministic given their task,
    so the plan computed once per task is optimal from the initial state of every episode."""

    def __init__(self, task_space=None):
        self.task_space = task_space
        self._plans: dict[str, list[str]] = {}

    def _plan(self, ctx: TurnContext) -> list[str]:
        key = ctx.task.task_id
        if key not in self._plans:
            space = self.task_space
            if space is None:
                from agentgym.registration import get_task_space

                space = get_task_space(ctx.task.env_id)
            self._plans[key] = space.solve(ctx.task) or []
        return self._plans[key]

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        if contexts is None:
            raise ValueError("OraclePolicy needs the rollout contexts (task and turn)")
        out = []
        for ctx in contexts:
            plan = self._plan(ctx)
            # Past the end of the plan (it failed) the oracle looks around instead of stopping.
            action = plan[ctx.turn] if ctx.turn < len(plan) else "look"
            out.append(Completion(text=_format(ctx, action)))
        return out
