"""The rollout engine: play G tasks x N episodes with one policy.

Every episode of a group is reset with the same task and seed, hence the same initial state.
At each turn the prompts of all still-active episodes go to the policy in one batched call;
finished episodes get no generation. Environments run in an executor (in-process or a process
pool); an episode whose environment broke is kept, marked `infra_error`, and the rest go on.

Tree rollouts (`branch=BranchConfig(...)`): at chosen steps of each episode the env is
snapshotted (agentgym.snapshot) before the step's action is played, and K more episodes start
from that state, each sampling its own action there and playing on. A branch is a trajectory of
its own whose steps start at the branch step; its metadata["tree"] names its parent episode and
that step (a tree id is the group id and the episode number). With a token-level engine and history="full" a
branch continues the parent's exact prompt ids, and the K branches of one point start in the same
batched call, so an engine that prefills identical prompts once (HFPolicy) prefills them once. An
engine that caches conversations (HFPolicy, on either engine) forks the parent's cache of the branch
step for its branches (`fork`): a branch's first prompt, its parent's there, is not prefilled again.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from agentgym import progress
from agentgym.chat import ChatConfig, ChatEnv
from agentgym.core import task_from_dict
from agentgym.executors import EnvResult, make_executor
from agentgym.errors import ConfigError
from agentgym.policies.base import Completion, Policy, SamplingParams, TurnContext
from agentgym.continuation import (CachedPrompts, TokenContinuation, caches_prefixes, constrains_replies,
                                   supports_tokens)
from agentgym.tasks.spec import TaskSpec
from agentgym.trajectory import Step, Trajectory
from agentgym.registration import check_env_id, get_task_space
from agentgym.snapshot import SnapshotError, require_snapshots
from agentgym.turn_monitors import (EpisodeStatus, OnProgress, OnTurn, RolloutProgress, TurnMonitor, TurnsBar,
                                    long_tail_rules)


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
    group: int
    slot: int
    task: TaskSpec
    traj: Trajectory
    prompt: Any = None
    info: dict = field(default_factory=dict)
    observation: str = ""
    done: bool = False
    started: float = 0.0  # time.monotonic() at reset, for the wall-clock limit
    offset: int = 0  # a branch: the steps its parent played before the branch step
    start: "_BranchStart | None" = None  # a branch: where it starts instead of a reset


@dataclass(frozen=True)
class _BranchStart:
    state: dict  # ChatEnv.snapshot() at the branch step, before its action
    prompt: Any
    info: dict
    observation: str
    prompt_ids: list[int] | None  # the parent's ids for that prompt (TokenContinuation continues them)


BRANCH_AT = ("every", "entropy")


@dataclass(frozen=True)
class BranchConfig:
    """Tree rollouts: `k` more continuations from chosen steps of every episode.

    at="every": the steps 0, every, 2*every, ...; at="entropy": the steps whose reply's mean
    surprise (minus the mean logprob of its sampled tokens, an estimate of the policy's entropy
    there, in nats per token) is at least `min_entropy`. Branches do not branch again.
    max_branches: at most this many branch episodes in the whole rollout (None: no cap); points
    chosen past it are not branched, and their episodes' metadata["tree"]["skipped"] counts them.
    """

    k: int = 2
    at: str = "every"
    every: int = 1
    min_entropy: float = 1.0
    max_branches: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"branch.k={self.k!r}: the continuations per branch point must be an integer >= 1")
        if self.at not in BRANCH_AT:
            raise ConfigError(f"branch.at={self.at!r} is unknown: use one of {', '.join(BRANCH_AT)}")
        if not isinstance(self.every, int) or self.every < 1:
            raise ConfigError(f"branch.every={self.every!r} must be an integer >= 1")
        if not math.isfinite(self.min_entropy):
            raise ConfigError(f"branch.min_entropy={self.min_entropy!r} must be a finite number")
        if self.max_branches is not None and (not isinstance(self.max_branches, int) or self.max_branches < 0):
            raise ConfigError(f"branch.max_branches={self.max_branches!r} must be an integer >= 0 or None")

    @classmethod
    def of(cls, branch: "BranchConfig | dict | int | None") -> "BranchConfig | None":
        if branch is None or isinstance(branch, cls):
            return branch
        if isinstance(branch, int) and not isinstance(branch, bool):
            return cls(k=branch)
        if isinstance(branch, dict):
            unknown = sorted(set(branch) - {f for f in cls.__dataclass_fields__})
            if unknown:
                raise ConfigError(f"unknown branch options {unknown}: use {', '.join(cls.__dataclass_fields__)}")
            return cls(**branch)
        raise ConfigError(f"branch= takes a BranchConfig, a dict of its fields or K, got {type(branch).__name__}")

    def chooses(self, step: int, comp: Completion) -> bool:
        """Whether the step `step` whose reply is `comp` is a branch point."""
        if self.at == "every":
            return step % self.every == 0
        logprobs = comp.response_logprobs
        if not logprobs:
            raise ConfigError("branch.at=entropy needs the policy's token logprobs, and this policy returns none: "
                              "use branch.at=every")
        return -sum(logprobs) / len(logprobs) >= self.min_entropy


@dataclass
class RolloutRequest:
    """What to play: `tasks` x `group_size` episodes of `env`, and how. Why to stop episodes early
    (a time limit, over-sampling) is not part of it: those wrap the rollout (agentgym.turn_monitors).

    env: a registered id, or a picklable factory returning a ChatEnv.
    tasks: TaskSpecs; with a registered id, also task ids (looked up in its task space, as
        env.reset's options["task"] is) or task dicts.
    seed: the reset seed of group g is `seed + g`, shared by the group's episodes.
    chat: ChatEnv's options, a ChatConfig or a dict of its keys (parser, history, memory, ...).
    executor: a registered executor name ("inprocess", "threads", "process", "ray", or your own:
        agentgym.executors.register_executor), or an executor pool object (the trainer's RayEnvPool);
        num_workers threads / processes / Ray workers (None: the executor's default);
        executor_options: the executor's own options (for "ray", RayConfig fields: address, ...).
    max_live_envs: at most this many environments exist at once (None: one per episode); an
        episode starts when a slot is free and its env is closed as soon as it ends, so SWE
        workspaces or browsers never pile up. Episodes keep their order and their groups' seeds.
    on_template_mismatch: with chat history="full" and a token-level policy (HF, vLLM, Ray), each
        episode is continued token in / token out (agentgym.continuation); a chat template
        that rewrites earlier turns raises ("error") or re-renders that turn ("per-turn", counted in
        the trajectory's metadata["retokenized_turns"]).
    branch: tree rollouts, a BranchConfig (or a dict of its fields, or K): K more episodes from the
        chosen steps of each episode, restored from env snapshots. Needs the "inprocess" or "threads"
        executor (snapshots are taken where the envs live) and an env with the snapshot contract.
    """

    env: str | Callable[[], ChatEnv]
    tasks: Sequence[TaskSpec | str | dict]
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
    on_template_mismatch: str = "error"  # history="full": "error" or "per-turn" (agentgym/continuation.py)
    branch: BranchConfig | dict | int | None = None  # tree rollouts (BranchConfig); the env must snapshot


def collect(env: str | Callable[[], ChatEnv], tasks: Sequence[TaskSpec | str | dict], policy: Policy,
            group_size: int = 1, *,
            on_turn: Callable[[int, int], None] | None = None, episode_time_limit: float | None = None,
            keep_groups: int | None = None, monitors: Sequence[TurnMonitor] = (),
            session: Any = progress.CURRENT, **options: Any) -> list[Trajectory]:
    """Play every task `group_size` times; returns the trajectories grouped task by task.

    `options` are RolloutRequest's fields (seed, sampling, executor, chat, max_turns, ...).
    episode_time_limit: seconds; an episode still running that long after its reset is cut before
        its next turn (truncated, metadata["time_limit"] = True): the long tail does not hold the batch.
    keep_groups: over-sampling; once this many groups have finished, every other group is stopped
        and marked metadata["dropped"] = "oversampled" (returned, never silently lost: the caller
        counts and drops them). Groups finishing on the same turn are kept in task order.
    monitors: more TurnMonitors for `play` (agentgym.turn_monitors), after those two.
    on_turn(done_episodes, total_episodes) is called after every batched turn; without it, a bar
    shows the episodes and turns in `session` (agentgym.progress; by default the session the
    calling command opened, if any; None: no bar)."""
    request = RolloutRequest(env, tasks, group_size, **options)
    rules = [*long_tail_rules(episode_time_limit, keep_groups), *monitors]
    s = progress.resolve(session) if on_turn is None else None
    if s is None:
        return play(request, policy, on_turn, monitors=rules)
    with progress.bar(f"collect {len(tasks)} tasks x {group_size}", unit="turns", every=15.0, session=s) as bar:
        return play(request, policy, monitors=[*rules, TurnsBar(bar)])


def _task_specs(tasks: Sequence[TaskSpec | str | dict], env_id: str | None) -> list[TaskSpec]:
    """The tasks as TaskSpecs: a task id is looked up in the env's task space (as env.reset's
    options["task"] is), a dict is read as a TaskSpec; anything else is one line."""
    if isinstance(tasks, (str, dict, TaskSpec)):
        raise ConfigError(f"tasks must be a list of tasks, got one {type(tasks).__name__}: wrap it in a list")
    space = None  # looked up once, and only when a task is given by id
    specs = []
    for task in tasks:
        if isinstance(task, str) and env_id is not None:
            if space is None:
                space = get_task_space(check_env_id(env_id))
            task = space.find(task)
        elif isinstance(task, dict):
            task = task_from_dict(task, "a task dict")
        if not isinstance(task, TaskSpec):
            raise ConfigError(f"tasks must be TaskSpecs{', task ids' if env_id else ''} or task dicts (e.g. "
                              f"get_task_space(env_id).split('heldout')), got {type(task).__name__}")
        specs.append(task)
    return specs


def play(request: RolloutRequest, policy: Policy, on_turn: Callable[[int, int], None] | None = None,
         on_progress: Callable[[RolloutProgress], None] | None = None, *,
         monitors: Sequence[TurnMonitor] = ()) -> list[Trajectory]:
    """The rollout engine itself: `request`'s episodes with `policy`, batched turn by turn.

    monitors (agentgym.turn_monitors.TurnMonitor), in order: each may stop episodes before every
    turn (and once after the last) and is told the progress after every turn; time limits,
    over-sampling and progress bars are monitors the caller composes. on_turn(done_episodes,
    total_episodes) and on_progress(RolloutProgress) after every turn, before the monitors."""
    r = request
    env, tasks, group_size, seed, sampling = r.env, r.tasks, r.group_size, r.seed, r.sampling
    max_turns, record_messages, max_live_envs = r.max_turns, r.record_messages, r.max_live_envs
    monitors = [*([OnTurn(on_turn)] if on_turn is not None else []),
                *([OnProgress(on_progress)] if on_progress is not None else []), *monitors]
    if group_size < 1:
        raise ValueError("group_size must be >= 1")
    if not callable(getattr(policy, "generate", None)):
        raise ConfigError(f"policy must be an agentgym Policy (with generate(), e.g. agentgym.policies.RandomPolicy() "
                          f"or HFPolicy), got {type(policy).__name__}")
    tasks = _task_specs(tasks, env if isinstance(env, str) else None)
    continuation = None
    admissible_only = r.sampling is not None and r.sampling.admissible_only
    if admissible_only and not constrains_replies(policy):
        raise ConfigError(f"admissible_only decoding needs an engine that decodes within given replies (HFPolicy's "
                          f"generate_ids(allowed_replies=...)); {type(policy).__name__} cannot: turn admissible_only off")
    if ChatConfig.of(r.chat).history == "full" and supports_tokens(policy):
        policy = continuation = TokenContinuation(policy, r.on_template_mismatch)  # token in, token out
    elif caches_prefixes(policy) or admissible_only:
        policy = continuation = CachedPrompts(policy)  # windowed prompts: the shared prefix is not prefilled again
    env_id = env if isinstance(env, str) else ""
    if env_id:

        env_id = check_env_id(env_id)
        factory = functools.partial(make_chat_env, gym.spec(env_id), r.env_kwargs, **ChatConfig.of(r.chat).kwargs())
    else:
        factory = env
    episodes: list[_Episode] = []
    for g, task in enumerate(tasks):
        for _ in range(group_size):
            traj = Trajectory(task_id=task.task_id, group_id=f"{g}:{task.task_id}", env_id=env_id or task.env_id,
                              seed=seed + g, task=task.to_dict())
            episodes.append(_Episode(index=len(episodes), group=g, slot=-1, task=task, traj=traj))
    if not episodes:
        return []
    if max_live_envs is not None and int(max_live_envs) < 1:
        raise ValueError("max_live_envs must be >= 1 (or None for one env per episode)")
    branch = BranchConfig.of(r.branch)
    # a tree rollout's branches need envs too: room for each episode's first branch point at once
    wanted = len(episodes) * (1 + branch.k if branch is not None else 1)
    n_slots = wanted if max_live_envs is None else min(wanted, int(max_live_envs))

    pool = make_executor(r.executor, factory, n_slots, num_workers=r.num_workers, options=r.executor_options)
    try:
        tree = _Tree(branch, pool, continuation) if branch is not None else None
    except Exception:
        pool.close()
        raise
    if tree is not None:
        for ep in episodes:
            ep.traj.metadata["tree"] = {"id": tree.id_of(ep), "parent": None, "step": 0}
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
                if ep.done:  # stopped by a rule (over-sampling) before it started
                    continue
                ep.slot = free.pop()
                batch.append(ep)
            results = pool.reset([(ep.slot, ep.task, ep.traj.seed) for ep in batch])
            for ep, res in zip(batch, results):
                _on_reset(ep, res)
                if ep.start is not None and not ep.done:
                    tree.restore(ep)
            live.extend(ep for ep in batch if not ep.done)
            release([ep for ep in batch if ep.done])

    def apply_stop_rules() -> None:
        statuses = None
        for monitor in monitors:
            if statuses is None:
                running = {id(ep) for ep in live}
                statuses = [EpisodeStatus(ep.index, ep.group, id(ep) in running, ep.done, ep.started,
                                          len(ep.traj.steps)) for ep in episodes]
            stops = monitor.stop(statuses)
            for index, why in (stops or {}).items():
                ep = episodes[index]
                if not ep.done:
                    ep.traj.truncated = True
                    ep.done = True
                ep.traj.metadata.update(why)
            if stops:
                statuses = None  # the next rule sees these episodes stopped

    try:
        while True:
            apply_stop_rules()
            start_pending()
            # the engine's own safety cap, beyond the env's time limit
            for ep in live:
                if ep.offset + len(ep.traj.steps) >= max_turns:
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
            contexts = [TurnContext(episode=str(ep.index), task=ep.task, turn=ep.offset + len(ep.traj.steps), info=ep.info,
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
                    if tree is not None and ep.start is None:
                        for child in tree.branch(ep, comp, len(episodes)):  # before the step's action is played
                            episodes.append(child)
                            pending.insert(0, child)
            results = pool.step([(ep.slot, ep.traj.steps[-1].text) for ep in to_step])
            for ep, res in zip(to_step, results):
                _on_step(ep, res)
            ended = [ep for ep in live if ep.done]
            live[:] = [ep for ep in live if not ep.done]
            release(ended)
            if monitors:
                so_far = _progress(episodes, limit)
                for monitor in monitors:
                    monitor.turn_done(so_far)
        apply_stop_rules()  # the last turn's finishers count too (over-sampling marks the rest)
    finally:
        pool.close()
        if continuation is not None:
            continuation.close()
            for ep in episodes:
                if turns := continuation.retokenized.get(str(ep.index)):
                    ep.traj.metadata["retokenized_turns"] = turns
                if turns := continuation.replies.free_turns.get(str(ep.index)):
                    ep.traj.metadata["free_turns"] = turns  # admissible_only turns with nothing admissible
    return [ep.traj for ep in sorted(episodes, key=lambda ep: ep.group)]  # branches stay with their group


class _Tree:
    """The branching of one rollout: which steps branch, their snapshots, and the branches' starts."""

    def __init__(self, config: BranchConfig, pool: Any, continuation: Any):
        envs = getattr(pool, "envs", None)
        if envs is None:
            raise ConfigError("branch= takes env snapshots where the envs live: use executor inprocess or threads "
                              f"({type(pool).__name__} keeps its envs elsewhere)")
        probe = next((e for e in envs if e is not None), None)
        if probe is not None:
            require_snapshots(probe, "branch=")
        self.config, self.pool, self.continuation = config, pool, continuation
        self.made = 0

    @staticmethod
    def id_of(ep: _Episode) -> str:
        return f"{ep.traj.group_id}#{ep.index}"  # as unique as group ids, and the same on a replayed rollout

    def branch(self, ep: _Episode, comp: Completion, first_index: int) -> list[_Episode]:
        """The K branch episodes of `ep`'s latest step when it is a branch point (its env not yet stepped)."""
        step = len(ep.traj.steps) - 1
        cfg = self.config
        if not cfg.chooses(step, comp):
            return []
        if cfg.max_branches is not None and self.made + cfg.k > cfg.max_branches:
            info = ep.traj.metadata["tree"]
            info["skipped"] = info.get("skipped", 0) + 1
            return []
        try:
            state = self.pool.envs[ep.slot].snapshot()
        except SnapshotError as exc:
            raise ConfigError(f"branch=: {exc}") from None
        start = _BranchStart(state, ep.prompt, ep.info, ep.observation, comp.prompt_ids)
        self.made += cfg.k
        children = []
        for j in range(cfg.k):
            traj = Trajectory(task_id=ep.traj.task_id, group_id=ep.traj.group_id, env_id=ep.traj.env_id,
                              seed=ep.traj.seed, task=ep.traj.task, instruction=ep.traj.instruction)
            child = _Episode(index=first_index + j, group=ep.group, slot=-1, task=ep.task, traj=traj, offset=step,
                             start=start)
            traj.metadata["tree"] = {"id": self.id_of(child), "parent": self.id_of(ep), "step": step}
            children.append(child)
            if callable(getattr(self.continuation, "fork", None)):  # now: the parent's cache ends at this turn
                self.continuation.fork(str(child.index), str(ep.index))
        return children

    def restore(self, ep: _Episode) -> None:
        """Move a branch's freshly reset env to its start (the parent's state at the branch step)."""
        start = ep.start
        try:
            self.pool.envs[ep.slot].restore(start.state)
        except Exception as exc:  # the env could not take its own snapshot back: this branch is lost
            _fail(ep, f"restore failed: {type(exc).__name__}: {exc}")
            return
        ep.prompt, ep.info, ep.observation = start.prompt, start.info, start.observation
        if start.prompt_ids is not None and callable(getattr(self.continuation, "start_from", None)):
            self.continuation.start_from(str(ep.index), start.prompt, start.prompt_ids)


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


def _action_formatter(pool, factory):
    """How this env wants actions written (for scripted policies), from one ChatEnv's parser: an
    in-process executor's own (`envs` is not part of the executor protocol: one of your own may
    hold none yet, or keep its envs elsewhere), else a ChatEnv made and closed for it."""
    built = next((env for env in getattr(pool, "envs", None) or () if isinstance(env, ChatEnv)), None)
    chat_env = built or factory()
    parser = chat_env.parser
    if built is None:
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
        response_allowed=comp.response_allowed,
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
