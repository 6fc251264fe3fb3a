"""What wraps a rollout from outside: stop rules and watchers that `agentgym.rollout.play` calls.

`play` knows how to play episodes and nothing about why a caller would cut them short or show
them; those concerns are `TurnMonitor`s the caller composes and hands to it:

    TimeLimit(seconds)        the long tail: an episode running that long after its reset is cut
    KeepFirstGroups(n)        over-sampling: once n groups have finished, the others are stopped
    TurnsBar(bar)             a progress bar counted in turns (agentgym.progress)

`collect` builds the first two from its `episode_time_limit` / `keep_groups` options and the
bar from its progress session; the trainer's batch producer and evaluation compose their own.
A rule's order matters: a time limit that ends a group's last episode lets it count as finished
for over-sampling in the same turn, so `collect` puts TimeLimit first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence


@dataclass(frozen=True)
class EpisodeStatus:
    """One episode as a stop rule sees it, before a batched turn (a copy: changing it stops nothing)."""

    index: int  # the episode's number, in the order play returns the trajectories
    group: int  # its group (task) in the request; a group's episodes are consecutive
    live: bool  # playing in an env now (False before its reset and after it ended)
    done: bool
    started: float  # time.monotonic() at its reset (0.0 before)
    turns: int


@dataclass
class RolloutProgress:
    """How far a rollout is, after each batched turn. turns_bound counts every episode at its turn
    limit (max_turns or the env's max_episode_steps), an ended episode at the turns it took, so it
    shrinks towards turns_done as episodes end early and the two meet when the rollout ends."""

    episodes_done: int
    episodes: int
    turns_done: int
    turns_bound: int


class TurnMonitor:
    """The protocol `play` calls; subclass it and override either method (both do nothing here).
    A monitor may keep state: give each rollout its own.

    stop(episodes): before every batched turn, and once more after the last, with every episode's
        EpisodeStatus in episode order. Returns {episode index: metadata} for the episodes to stop:
        one not yet ended is ended as truncated (one not yet started never starts), and every
        named episode's trajectory metadata is updated with its dict, which says why (so stopped
        episodes come back marked, never silently lost).
    turn_done(progress): after every batched turn, with the rollout's RolloutProgress."""

    def stop(self, episodes: Sequence[EpisodeStatus]) -> Mapping[int, dict]:
        return {}

    def turn_done(self, progress: RolloutProgress) -> None:
        pass


class TimeLimit(TurnMonitor):
    """Cuts an episode still running `seconds` after its reset, before its next turn (truncated,
    metadata["time_limit"] = True): the long tail does not hold the batch."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def stop(self, episodes: Sequence[EpisodeStatus]) -> Mapping[int, dict]:
        running = [e for e in episodes if e.live and not e.done]
        if not running:
            return {}
        now = time.monotonic()
        return {e.index: {"time_limit": True} for e in running if now - e.started > self.seconds}


class KeepFirstGroups(TurnMonitor):
    """Over-sampling: records groups as they finish; once `keep` have, every other group is stopped
    and marked metadata["dropped"] = "oversampled" (the caller counts and drops them). Groups
    finishing on the same turn are kept in task order."""

    def __init__(self, keep: int):
        self.keep = keep
        self.finished: list[int] = []  # groups in the order they finished
        self.dropped: set[int] = set()

    def stop(self, episodes: Sequence[EpisodeStatus]) -> Mapping[int, dict]:
        groups: dict[int, list[EpisodeStatus]] = {}
        for e in episodes:
            groups.setdefault(e.group, []).append(e)
        for g, members in groups.items():
            if g not in self.finished and g not in self.dropped and all(e.done for e in members):
                self.finished.append(g)
        if len(self.finished) < self.keep:
            return {}
        kept = set(self.finished[:self.keep])
        out: dict[int, dict] = {}
        for g, members in groups.items():
            if g in kept or g in self.dropped:
                continue
            self.dropped.add(g)
            out.update({e.index: {"dropped": "oversampled"} for e in members})
        return out


class TurnsBar(TurnMonitor):
    """A progress bar (agentgym.progress.Bar) counted in turns, not episodes: a batch's episodes
    often end together, on its last turn, so an episode count would sit at 0 until then.

    For one rollout among several (evaluation's batches): turns_before were played by earlier
    rollouts, turns_later are the bound of those not started; episodes_before and episodes_total
    place this rollout's episodes in the whole."""

    def __init__(self, bar, turns_before: int = 0, turns_later: int = 0, episodes_before: int = 0,
                 episodes_total: int | None = None):
        self.bar = bar
        self.turns_before, self.turns_later = turns_before, turns_later
        self.episodes_before, self.episodes_total = episodes_before, episodes_total
        self.turn = 0

    def turn_done(self, progress: RolloutProgress) -> None:
        self.turn += 1
        total = progress.episodes if self.episodes_total is None else self.episodes_total
        self.bar.update(self.turns_before + progress.turns_done,
                        total=self.turns_before + progress.turns_bound + self.turns_later,
                        info=f"turn {self.turn}, {self.episodes_before + progress.episodes_done}/{total} episodes")


class OnTurn(TurnMonitor):
    """A plain callback after every turn: fn(episodes_done + episodes_before, episodes_total)
    (the `on_turn` / `on_progress(done, total)` of collect, play and evaluate)."""

    def __init__(self, fn: Callable[[int, int], None], episodes_before: int = 0, episodes_total: int | None = None):
        self.fn, self.episodes_before, self.episodes_total = fn, episodes_before, episodes_total

    def turn_done(self, progress: RolloutProgress) -> None:
        total = progress.episodes if self.episodes_total is None else self.episodes_total
        self.fn(self.episodes_before + progress.episodes_done, total)


class OnProgress(TurnMonitor):
    """A callback given the RolloutProgress after every turn (play's `on_progress`)."""

    def __init__(self, fn: Callable[[RolloutProgress], None]):
        self.fn = fn

    def turn_done(self, progress: RolloutProgress) -> None:
        self.fn(progress)


def long_tail_rules(episode_time_limit: float | None = None, keep_groups: int | None = None) -> list[TurnMonitor]:
    """The trainer's long-tail controls as monitors, in the order they must run (see the module)."""
    rules: list[TurnMonitor] = []
    if episode_time_limit is not None:
        rules.append(TimeLimit(episode_time_limit))
    if keep_groups is not None:
        rules.append(KeepFirstGroups(keep_groups))
    return rules
