"""Scripted policies: uniform random over admissible actions, and the env family's oracle."""

from __future__ import annotations

import numpy as np

from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext
from agentgym.registration import get_task_space


def _format(ctx: TurnContext, action: str) -> str:
    return ctx.format_action(action) if ctx.format_action else action


class RandomPolicy:
    """Picks uniformly among `info["admissible_actions"]`; with an open action space, writes a
    random short string (which the env will mostly reject: a lower bound for any agent)."""

    acts_on_contexts = True  # no context, no action: it cannot judge (policies/base.py)

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
    so the plan computed once per task is optimal from the initial state of every episode.

    slip_prob > 0: before each plan step, with this probability the oracle first "slips" with a
    command that is not admissible (another step of its plan, out of turn, such as taking an
    object before reaching it). Invalid commands leave the state unchanged, so the plan stays
    optimal, and the next prompt shows the env's reply to the slip ("Nothing happens."): SFT on
    the valid steps of such episodes shows the model how to go on after a mistake, a state the
    plain oracle never visits.

    search=True: each episode follows the task space's `solve_searching` plan instead, an expert
    that knows only what it has seen and searches receptacles in a random order (household).
    dawdle_prob > 0 (with search): that expert idles before each command with this probability
    (look / inventory / examine), valid turns that change nothing: an imperfect demonstrator.

    tags=True: each reply opens with an RLVMR meta-reasoning tag picked by rule from what the
    oracle does (agentgym.rewards.meta_reasoning.demonstration_tag over the task space's
    `meta_tag`): reflection on the turn after a failed action, else explore / monitor / planning
    as the task space classes the command. SFT on such replies gives a warm start that tags."""

    acts_on_contexts = True

    def __init__(self, task_space=None, slip_prob: float = 0.0, seed: int = 0, search: bool = False,
                 dawdle_prob: float = 0.0, tags: bool = False):
        if not 0.0 <= slip_prob < 1.0:
            raise ValueError(f"slip_prob must be in [0, 1), got {slip_prob}")
        if dawdle_prob and not search:
            raise ValueError("dawdle_prob is a trait of the searching expert: pass search=True")
        if search and task_space is not None and not hasattr(task_space, "solve_searching"):
            raise ValueError(f"{type(task_space).__name__} has no searching oracle (solve_searching): "
                             "use the plain oracle for this env")
        if tags and task_space is not None and not callable(getattr(task_space, "meta_tag", None)):
            raise ValueError(f"{type(task_space).__name__} has no meta-reasoning tag rule (meta_tag): its "
                             "demonstrations cannot be tagged (sft.tags=false)")
        self.task_space = task_space
        self.tags = tags
        self._tagging: dict[str, tuple[list[str], str | None]] = {}  # episode -> (earlier valid actions, last)
        self.search = search
        self.dawdle_prob = dawdle_prob
        self.slip_prob = slip_prob
        self.rng = np.random.default_rng(seed)
        self._plans: dict[str, list[str]] = {}
        self._episodes: dict[str, tuple[int, bool]] = {}  # episode -> (plan position, last move was a slip)

    def _plan(self, ctx: TurnContext) -> list[str]:
        key = ctx.episode if self.search else ctx.task.task_id  # a searcher's plan differs per episode
        if key not in self._plans or (self.search and ctx.turn == 0):  # episode keys recur across rollouts
            space = self.task_space
            if space is None:

                space = get_task_space(ctx.task.env_id)
            if self.search:
                extra = {"dawdle_prob": self.dawdle_prob} if self.dawdle_prob else {}
                plan = space.solve_searching(ctx.task, self.rng, **extra)
            else:
                plan = space.solve(ctx.task)
            self._plans[key] = plan or []
        return self._plans[key]

    def _position(self, ctx: TurnContext) -> int:
        if not self.slip_prob:
            return ctx.turn
        position, slipped = self._episodes.get(ctx.episode, (0, False)) if ctx.turn else (0, False)
        if ctx.turn and not slipped and ctx.info.get("action_valid", True):
            position += 1
        return position

    def _slip(self, ctx: TurnContext, plan: list[str], position: int) -> str | None:
        admissible = set(ctx.info.get("admissible_actions") or ())
        if not admissible:  # an open action space: no way to know a command is invalid, so no slip
            return None
        candidates = [a for i, a in enumerate(plan) if i != position and a not in admissible]
        return candidates[int(self.rng.integers(len(candidates)))] if candidates else None

    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None) -> list[Completion]:
        if contexts is None:
            raise ValueError("OraclePolicy needs the rollout contexts (task and turn)")
        out = []
        for ctx in contexts:
            plan = self._plan(ctx)
            position = self._position(ctx)
            slip = self._slip(ctx, plan, position) if self.slip_prob and self.rng.random() < self.slip_prob else None
            if self.slip_prob:
                self._episodes[ctx.episode] = (position, slip is not None)
            # Past the end of the plan (it failed) the oracle looks around instead of stopping.
            action = slip or (plan[position] if position < len(plan) else "look")
            text = _format(ctx, action)
            out.append(Completion(text=self._tagged(ctx, action, text) if self.tags else text))
        return out

    def _tagged(self, ctx: TurnContext, action: str, text: str) -> str:
        # lazy: agentgym.rewards imports the policies package, which imports this module
        from agentgym.rewards.meta_reasoning import demonstration_tag, tagged_reply

        earlier, last = self._tagging.get(ctx.episode, ([], None)) if ctx.turn else ([], None)
        failed = bool(ctx.turn) and not ctx.info.get("action_valid", True)
        if last is not None and not failed:
            earlier = earlier + [last]
        self._tagging[ctx.episode] = (earlier, action)
        space = self.task_space
        if space is None:

            space = get_task_space(ctx.task.env_id)
        if not callable(getattr(space, "meta_tag", None)):
            raise ValueError(f"{type(space).__name__} has no meta-reasoning tag rule (meta_tag): its demonstrations "
                             "cannot be tagged (sft.tags=false)")
        return tagged_reply(demonstration_tag(space.meta_tag(action, earlier), failed), text)
