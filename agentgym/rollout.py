"""The rollout engine: play G tasks x N episodes with one policy.

Every episode of a group is reset with the same task and seed, hence the same initial state.
At each turn the prompts of all still-active episodes go to the policy in one batched call;
finished episodes get no generation. Environments run in an executor (in-process or a process
pool); an episode whose environment broke is kept, marked `infra_error`, and the rest go on.
"""

from __future__ import annotations

import functools
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from agentgym import progress
from agentgym.chat import ChatConfig, ChatEnv
from agentgym.executors import EnvResult, make_executor
from agentgym.policies.base import Completion, Policy, SamplingParams, TurnContext
from agentgym.continuation import CachedPrompts, TokenContinuation, caches_prefixes, supports_tokens
from agentgym.tasks.spec import TaskSpec
from agentgym.trajectory import Step, Trajectory


def make_chat_env(env: str | EnvSpec, env_kwargs: dict | None = None, **chat_kwargs) -> ChatEnv:
    """Top-level (hence picklable through functools.partial) factory used by the executors.

    Given an EnvSpec it needs no registry, so envs registered at run time in the parent process
    also build in spawned worker processes."""
    from agentgym.registration import make  # importing agentgym registers the built-in ids in a worker

    if isinstance(env, EnvSpec):
        return ChatEnv(gym.make(env, **(env_kwargs or {})), **chat_kwargs)
    return ChatEnv(make(env, **(env_kwargs or {})), **chat_kwargs)


@dataclass
class _Episode:
    index: int  # the episode's own number (TurnContext.episode); `slot` is the env it runs in
    slot: int
    task: TaskSpec
    traj: Trajectory
    prompt: Any = None
    info: dict = field(default_factory=dict)
    observation: str = ""
    done: bool = False
    started: float = 0.0  # time.monotonic() at reset, for the wall-clock limit


@dataclass
class RolloutRequest:
    """What to play: `tasks` x `group_size` episodes of `env`, and how.

    env: a registered id, or a picklable factory returning a ChatEnv.
    seed: the reset seed of group g is `seed + g`, shared by the group's episodes.
    chat: ChatEnv's options, a ChatConfig or a dict of its keys (parser, history, memory, ...).
    executor: a registered executor name ("inprocess", "threads", "process", "ray", or your own:
        agentgym.executors.register_executor), or an executor pool object (the trainer's RayEnvPool);
        num_workers threads / processes / Ray workers (None: the executor's default);
        executor_options: the executor's own options (for "ray", RayConfig fields: address, ...).
    max_live_envs: at most this many environments exist at once (None: one per episode); an
        episode starts when a slot is free and its env is closed as soon as it ends, so SWE
        workspaces or browsers never pile up. Episodes keep their order and their groups' seeds.
    episode_time_limit: seconds; an episode still running that long after its reset is cut before
        its next turn (truncated, metadata["time_limit"] = True): the long tail does not hold the batch.
    keep_groups: over-sampling; once this many groups have finished, every other group is stopped
        and marked metadata["dropped"] = "oversampled" (returned, never silently lost: the caller
        counts and drops them). Groups finishing on the same turn are kept in task order.
    on_template_mismatch: with chat history="full" and a token-level policy (HF, vLLM, Ray), each
        episode is continued token in / token out (agentgym.continuation); a chat template
        that rewrites earlier turns raises ("error") or re-renders that turn ("per-turn", counted in
        the trajectory's metadata["retokenized_turns"]).
    """

    env: str | Callable[[], ChatEnv]
    tasks: Sequence[TaskSpec]
    group_size: int = 1
    seed: int = 0
    sampling: SamplingParams | None = None
    executor: Any = "inprocess"
    num_workers: int | None = None
    executor_options: dict | None = None
    env_kwargs: dict | None = None
    chat: ChatConfig | dict | None = None
    max_turns: int = 1000
    record_messages: bool = True
    max_live_envs: int | None = 256
    episode_time_limit: float | None = None
    keep_groups: int | None = None
    on_template_mismatch: str = "error"  # history="full": "error" or "per-turn" (agentgym/continuation.py)


def collect(env: str | Callable[[], ChatEnv], tasks: Sequence[TaskSpec], policy: Policy, group_size: int = 1, *,
            on_turn: Callable[[int, int], None] | None = None, **options: Any) -> list[Trajectory]:
    """Play every task `group_size` times; returns the trajectories grouped task by task.

    `options` are RolloutRequest's fields (seed, sampling, executor, chat, max_turns, ...).
    on_turn(done_episodes, total_episodes) is called after every batched turn; without it, and
    when a command asked for progress, a bar of its own shows the episodes and turns."""
    request = RolloutRequest(env, tasks, group_size, **options)
    if on_turn is None and progress.active():
        # counted in turns, not episodes: a batch's episodes often end together, on its last turn
        with progress.bar(f"collect {len(tasks)} tasks x {group_size}", unit="turns", every=15.0) as bar:
            turn = itertools.count(1)
            return play(request, policy, on_progress=lambda p: bar.update(
                p.turns_done, total=p.turns_bound, info=f"turn {next(turn)}, {p.episodes_done}/{p.episodes} episodes"))
    return play(request, policy, on_turn)


@dataclass
class RolloutProgress:
    """How far a rollout is, after each batched turn. turns_bound counts every episode at its turn
    limit (max_turns or the env's max_episode_steps), an ended episode at the turns it took, so it
    shrinks towards turns_done as episodes end early and the two meet when the rollout ends."""

    episodes_done: int
    episodes: int
    turns_done: int
    turns_bound: int


def play(request: RolloutRequest, policy: Policy, on_turn: Callable[[int, int], None] | None = None,
         on_progress: Callable[[RolloutProgress], None] | None = None) -> list[Trajectory]:
    """The rollout engine itself: `request`'s episodes with `policy`, batched turn by turn.
    on_turn(done_episodes, total_episodes) and on_progress(RolloutProgress) after every turn."""
    r = request
    env, tasks, group_size, seed, sampling = r.env, r.tasks, r.group_size, r.seed, r.sampling
    max_turns, record_messages, max_live_envs = r.max_turns, r.record_messages, r.max_live_envs
    episode_time_limit, keep_groups = r.episode_time_limit, r.keep_groups
    if group_size < 1:
        raise ValueError("group_size must be >= 1")
    continuation = None
    if ChatConfig.of(r.chat).history == "full" and supports_tokens(policy):
        policy = continuation = TokenContinuation(policy, r.on_template_mismatch)  # token in, token out
    elif caches_prefixes(policy):
        policy = continuation = CachedPrompts(policy)  # windowed prompts: the shared prefix is not prefilled again
    env_id = env if isinstance(env, str) else ""
    if env_id:
        from agentgym.registration import check_env_id

        env_id = check_env_id(env_id)
        factory = functools.partial(make_chat_env, gym.spec(env_id), r.env_kwargs, **ChatConfig.of(r.chat).kwargs())
    else:
        factory = env
    episodes: list[_Episode] = []
    for g, task in enumerate(tasks):
        for _ in range(group_size):
            traj = Trajectory(task_id=task.task_id, group_id=f"{g}:{task.task_id}", env_id=env_id or task.env_id,
                              seed=seed + g, task=task.to_dict())
            episodes.append(_Episode(index=len(episodes), slot=-1, task=task, traj=traj))
    if not episodes:
        return []
    if max_live_envs is not None and int(max_live_envs) < 1:
        raise ValueError("max_live_envs must be >= 1 (or None for one env per episode)")
    n_slots = len(episodes) if max_live_envs is None else min(len(episodes), int(max_live_envs))

    pool = make_executor(r.executor, factory, n_slots, num_workers=r.num_workers, options=r.executor_options)
    limit = _turn_limit(env_id, r.env_kwargs, max_turns)
    format_action = _action_formatter(pool, factory)
    pending = list(reversed(episodes))  # popped from the end: episodes start in order
    free = list(reversed(range(n_slots)))
    live: list[_Episode] = []

    def release(eps: list[_Episode]) -> None:
        if eps:
            pool.release([ep.slot for ep in eps])
            free.extend(sorted((ep.slot for ep in eps), reverse=True))

    def start_pending() -> None:
        while free and pending:
            batch = []
            while free and pending:
                ep = pending.pop()
                if ep.done:  # dropped by over-sampling before it started
                    continue
                ep.slot = free.pop()
                batch.append(ep)
            results = pool.reset([(ep.slot, ep.task, ep.traj.seed) for ep in batch])
            for ep, res in zip(batch, results):
                _on_reset(ep, res)
            live.extend(ep for ep in batch if not ep.done)
            release([ep for ep in batch if ep.done])

    try:
        finished_groups: list[int] = []
        while True:
            if episode_time_limit is not None:
                _cut_slow(live, episode_time_limit)
            if keep_groups is not None:
                _drop_overflow(episodes, group_size, keep_groups, finished_groups)
            start_pending()
            # the engine's own safety cap, beyond the env's time limit
            for ep in live:
                if len(ep.traj.steps) >= max_turns:
                    ep.traj.truncated = True
                    ep.done = True
            stopped = [ep for ep in live if ep.done]
            live[:] = [ep for ep in live if not ep.done]
            release(stopped)
            if stopped:
                continue
            active = live
            if not active:
                break
            contexts = [TurnContext(episode=str(ep.index), task=ep.task, turn=len(ep.traj.steps), info=ep.info,
                                    format_action=format_action) for ep in active]
            completions = policy.generate([ep.prompt for ep in active], sampling, contexts)
            if len(completions) != len(active):
                raise RuntimeError(f"policy returned {len(completions)} completions for {len(active)} prompts")
            to_step = []
            for ep, comp in zip(active, completions):
                if comp.error is not None:  # the policy backend failed: not the agent's fault
                    _fail(ep, f"policy error: {comp.error}")
                else:
                    ep.traj.steps.append(_new_step(ep, comp, record_messages))
                    to_step.append(ep)
            results = pool.step([(ep.slot, ep.traj.steps[-1].text) for ep in to_step])
            for ep, res in zip(to_step, results):
                _on_step(ep, res)
            ended = [ep for ep in live if ep.done]
            live[:] = [ep for ep in live if not ep.done]
            release(ended)
            if on_turn is not None:
                on_turn(sum(ep.done for ep in episodes), len(episodes))
            if on_progress is not None:
                on_progress(_progress(episodes, limit))
        if keep_groups is not None:
            _drop_overflow(episodes, group_size, keep_groups, finished_groups)
    finally:
        pool.close()
        if continuation is not None:
            continuation.close()
            for ep in episodes:
                if turns := continuation.retokenized.get(str(ep.index)):
                    ep.traj.metadata["retokenized_turns"] = turns
    return [ep.traj for ep in episodes]


def _turn_limit(env_id: str, env_kwargs: dict | None, max_turns: int) -> int:
    steps = (env_kwargs or {}).get("max_episode_steps")
    if steps is None and env_id:
        steps = gym.spec(env_id).max_episode_steps
    return min(max_turns, int(steps)) if steps else max_turns


def _progress(episodes: list[_Episode], limit: int) -> RolloutProgress:
    done = [ep for ep in episodes if ep.done]
    turns = sum(len(ep.traj.steps) for ep in episodes)
    bound = sum(len(ep.traj.steps) if ep.done else max(limit, len(ep.traj.steps)) for ep in episodes)
    return RolloutProgress(len(done), len(episodes), turns, bound)


def _cut_slow(episodes: list[_Episode], limit: float) -> None:
    now = time.monotonic()
    for ep in episodes:
        if not ep.done and now - ep.started > limit:
            ep.traj.truncated = True
            ep.traj.metadata["time_limit"] = True
            ep.done = True


def _drop_overflow(episodes: list[_Episode], group_size: int, keep: int, finished: list[int]) -> None:
    """Record groups as they finish; once `keep` have, stop and mark every other group."""
    groups = [episodes[g * group_size:(g + 1) * group_size] for g in range(len(episodes) // group_size)]
    for g, members in enumerate(groups):
        if g not in finished and all(ep.done for ep in members) and not members[0].traj.metadata.get("dropped"):
            finished.append(g)
    if len(finished) < keep:
        return
    kept = set(finished[:keep])
    for g, members in enumerate(groups):
        if g in kept or members[0].traj.metadata.get("dropped"):
            continue
        for ep in members:
            if not ep.done:
                ep.traj.truncated = True
                ep.done = True
            ep.traj.metadata["dropped"] = "oversampled"


def _action_formatter(pool, factory):
    """How this env wants actions written (for scripted policies), from one ChatEnv's parser."""
    envs = getattr(pool, "envs", None)
    chat_env = envs[0] if envs else factory()
    parser = chat_env.parser
    if not envs:
        chat_env.close()
    return parser.format


def _new_step(ep: _Episode, comp: Completion, record_messages: bool) -> Step:
    return Step(
        observation=ep.observation,
        anchor=str(ep.info.get("anchor", "")),
        text=comp.text,
        prompt_ids=comp.prompt_ids,
        response_ids=comp.response_ids,
        response_logprobs=comp.response_logprobs,
        messages=ep.prompt if record_messages else None,
        policy_version=comp.policy_version,
    )


def _fail(ep: _Episode, message: str) -> None:
    ep.traj.infra_error = True
    ep.traj.error = message
    ep.done = True


def _on_reset(ep: _Episode, res: EnvResult) -> None:
    if res.error is not None:
        _fail(ep, f"reset failed: {res.error}")
        return
    ep.prompt, ep.info = res.obs, res.info
    ep.started = time.monotonic()
    ep.observation = res.info.get("env_observation", "")
    ep.traj.instruction = res.info["instruction"]


def _on_step(ep: _Episode, res: EnvResult) -> None:
    if res.error is not None:
        _fail(ep, f"step failed: {res.error}")
        return
    step = ep.traj.steps[-1]
    info = res.info
    step.action = info.get("action")
    step.action_valid = bool(info["action_valid"])
    step.reward = float(res.reward)
    step.progress = info.get("progress")
    ep.prompt, ep.info = res.obs, info
    ep.observation = info.get("env_observation", "")
    ep.traj.success = bool(info["success"])
    ep.traj.score = float(info["score"])
    ep.traj.terminated, ep.traj.truncated = res.terminated, res.truncated
    if res.terminated or res.truncated:
        ep.traj.final_observation = ep.observation
        ep.done = True
