"""Curricula: which of the candidate training tasks to play next.

    curriculum = make_curriculum("sec", alpha=0.3, tau=0.2)
    tasks = curriculum.select(candidates, n, rng, pool, category_of)
    ... rollouts, advantages ...
    curriculum.update({category: [mean |A| of each trajectory of that category], ...})

- uniform:       every candidate equally likely.
- learnability:  task i with probability proportional to p_i (1 - p_i) + floor, p_i the task's
                 success estimate from the pool, shrunk toward its category's pooled estimate
                 (`shrink` pseudo-rollouts; see Learnability) so that untried tasks of hopeless
                 categories do not all look like p = 0.5.
- sec:           Self-Evolving Curriculum. Arms are task categories; after each batch an arm's
                 reward r is the mean |advantage| of its samples, and Q <- Q + alpha (r - Q)
                 (TD(0) with a constant step, so old batches fade: the problem is non-stationary).
                 Categories are drawn from softmax(Q / tau), then a task uniformly within the category.
- dump:          DUMP. Arms are categories; score = mean |A| over the arm's last `window` samples
                 + c sqrt(ln(sum_k n_k) / n_arm), n the number of samples drawn from each arm. Arms
                 never tried come first; otherwise categories are drawn from softmax(score / tau)
                 (tau = 0: the best score, ties broken at random).

A "sample" of a category is one trajectory of one of its tasks, and its |A| is the mean absolute
advantage over the trajectory's steps. For episode-level estimators (GRPO, RLOO) that is exactly
|A_i|; for step-level ones (GiGPO) long episodes do not outweigh short ones.

All states are JSON-serializable (state_dict / load_state_dict) so they checkpoint with the trainer.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Sequence

import numpy as np

from agentgym.errors import ConfigError
from agentgym.tasks.spec import TaskSpec

CategoryOf = Callable[[TaskSpec], str]


def softmax(x: np.ndarray, tau: float) -> np.ndarray:
    z = np.asarray(x, dtype=np.float64) / tau
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def _pick(rng: np.random.Generator, size: int, n: int, p: np.ndarray | None = None) -> np.ndarray:
    """n indices out of `size`, without replacement when there are enough (with p: weighted)."""
    return rng.choice(size, size=n, replace=n > size, p=p)


class Curriculum:
    name = "base"

    def select(self, tasks: Sequence[TaskSpec], n: int, rng: np.random.Generator, pool=None,
               category_of: CategoryOf | None = None) -> list[TaskSpec]:
        raise NotImplementedError

    def update(self, samples: dict[str, list[float]]) -> None:
        """samples: category -> the |A| of each of its samples in the last batch."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class Uniform(Curriculum):
    name = "uniform"

    def select(self, tasks, n, rng, pool=None, category_of=None):
        return [tasks[int(i)] for i in _pick(rng, len(tasks), n)]


class Learnability(Curriculum):
    """p(1 - p) + floor, with p a task's success estimate shrunk toward its category's.

    With a flat prior every untried task has p = 0.5, the largest weight, so on a big split the
    curriculum would keep drawing untried tasks (uniform sampling in disguise). With `shrink` = k > 0
    a task's estimate is (s + k m_c) / (n + k): its s successes in n rollouts plus k pseudo-rollouts
    at m_c, the pooled posterior mean of its category; an untried task of a category the agent
    never solves gets a low weight. shrink = 0 uses the pool's own per-task posterior mean."""

    name = "learnability"

    def __init__(self, floor: float = 0.01, shrink: float = 4.0):
        if not floor >= 0 or not shrink >= 0:
            raise ConfigError(f"learnability floor and shrink must be >= 0, got {floor}, {shrink}")
        self.floor, self.shrink = float(floor), float(shrink)

    def estimates(self, tasks: Sequence[TaskSpec], pool, category_of: CategoryOf | None = None) -> np.ndarray:
        if pool is None:
            raise ConfigError("the learnability curriculum needs a task pool with success estimates")
        if self.shrink == 0 or category_of is None:
            return np.array([pool.mean(t.task_id) for t in tasks])
        a0, b0 = pool.config.prior
        totals: dict[str, list[float]] = {}
        for e in pool.entries.values():
            c = totals.setdefault(e.category, [0.0, 0.0])
            c[0] += e.successes
            c[1] += e.trials
        out = []
        for t in tasks:
            e = pool.entries.get(t.task_id)
            cat = e.category if e is not None else category_of(t)
            s_c, n_c = totals.get(cat, (0.0, 0.0))
            m_c = (a0 + s_c) / (a0 + b0 + n_c)
            s, n = (e.successes, e.trials) if e is not None else (0.0, 0.0)
            out.append((s + self.shrink * m_c) / (n + self.shrink))
        return np.array(out)

    def weights(self, tasks: Sequence[TaskSpec], pool, category_of: CategoryOf | None = None) -> np.ndarray:
        p = self.estimates(tasks, pool, category_of)
        return p * (1.0 - p) + self.floor

    def probabilities(self, tasks, pool, category_of: CategoryOf | None = None) -> np.ndarray:
        w = self.weights(tasks, pool, category_of)
        return w / w.sum()

    def select(self, tasks, n, rng, pool=None, category_of=None):
        p = self.probabilities(tasks, pool, category_of)
        if n <= len(tasks) and np.count_nonzero(p) < n:  # not enough positive weights to draw without replacement
            p = np.full(len(tasks), 1.0 / len(tasks))
        return [tasks[int(i)] for i in _pick(rng, len(tasks), n, p)]

    def state_dict(self):
        return {"floor": self.floor, "shrink": self.shrink}

    def load_state_dict(self, state):
        self.floor, self.shrink = float(state["floor"]), float(state["shrink"])


class CategoryBandit(Curriculum):
    """Shared part of SEC and DUMP: draw categories from `probabilities`, then tasks within them."""

    def probabilities(self, categories: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def select(self, tasks, n, rng, pool=None, category_of=None):
        if category_of is None:
            raise ConfigError(f"the {self.name} curriculum needs the task space's category function")
        by_cat: dict[str, list[TaskSpec]] = {}
        for t in tasks:
            by_cat.setdefault(category_of(t), []).append(t)
        cats = sorted(by_cat)
        p = self.probabilities(cats)
        drawn = rng.choice(len(cats), size=n, p=p)
        out: list[TaskSpec] = []
        for k, count in zip(*np.unique(drawn, return_counts=True)):
            members = by_cat[cats[int(k)]]
            out += [members[int(i)] for i in _pick(rng, len(members), int(count))]
        order = rng.permutation(len(out))  # do not hand the trainer tasks sorted by category
        return [out[int(i)] for i in order]


class SEC(CategoryBandit):
    name = "sec"

    def __init__(self, alpha: float = 0.3, tau: float = 0.2, q0: float = 0.0):
        if not 0.0 < alpha <= 1.0:
            raise ConfigError(f"sec alpha must be in (0, 1], got {alpha}")
        if not tau > 0:
            raise ConfigError(f"sec tau must be > 0, got {tau}")
        self.alpha, self.tau, self.q0 = float(alpha), float(tau), float(q0)
        self.q: dict[str, float] = {}

    def probabilities(self, categories):
        return softmax(np.array([self.q.get(c, self.q0) for c in categories]), self.tau)

    def update(self, samples):
        for cat, values in samples.items():
            if len(values) == 0:
                continue
            reward = float(np.mean(values))
            q = self.q.get(cat, self.q0)
            self.q[cat] = q + self.alpha * (reward - q)

    def state_dict(self):
        return {"alpha": self.alpha, "tau": self.tau, "q0": self.q0, "q": dict(self.q)}

    def load_state_dict(self, state):
        self.alpha, self.tau, self.q0 = state["alpha"], state["tau"], state["q0"]
        self.q = {k: float(v) for k, v in state["q"].items()}


class DUMP(CategoryBandit):
    name = "dump"

    def __init__(self, c: float = 0.5, tau: float = 0.1, window: int = 256):
        if not c >= 0 or not tau >= 0 or window < 1:
            raise ConfigError(f"dump needs c >= 0, tau >= 0 and window >= 1, got c={c}, tau={tau}, window={window}")
        self.c, self.tau, self.window = float(c), float(tau), int(window)
        self.n: dict[str, int] = {}
        self.recent: dict[str, deque] = {}

    def scores(self, categories: Sequence[str]) -> np.ndarray:
        total = sum(self.n.values())
        out = []
        for cat in categories:
            n = self.n.get(cat, 0)
            if n == 0:
                out.append(math.inf)
                continue
            recent = self.recent.get(cat) or [0.0]
            bonus = self.c * math.sqrt(math.log(total) / n) if total > 1 else 0.0
            out.append(float(np.mean(recent)) + bonus)
        return np.array(out)

    def probabilities(self, categories):
        s = self.scores(categories)
        untried = np.isinf(s)
        if untried.any():
            return untried / untried.sum()
        if self.tau == 0:
            best = s == s.max()
            return best / best.sum()
        return softmax(s, self.tau)

    def update(self, samples):
        for cat, values in samples.items():
            if len(values) == 0:
                continue
            self.n[cat] = self.n.get(cat, 0) + len(values)
            self.recent.setdefault(cat, deque(maxlen=self.window)).extend(float(v) for v in values)

    def state_dict(self):
        return {"c": self.c, "tau": self.tau, "window": self.window, "n": dict(self.n),
                "recent": {k: list(v) for k, v in self.recent.items()}}

    def load_state_dict(self, state):
        self.c, self.tau, self.window = state["c"], state["tau"], int(state["window"])
        self.n = {k: int(v) for k, v in state["n"].items()}
        self.recent = {k: deque(v, maxlen=self.window) for k, v in state["recent"].items()}


CURRICULA = {"uniform": Uniform, "learnability": Learnability, "sec": SEC, "dump": DUMP}


def make_curriculum(name: str, **options) -> Curriculum:
    if name not in CURRICULA:
        raise ConfigError(f"unknown curriculum {name!r}: choose one of {', '.join(CURRICULA)}")
    try:
        return CURRICULA[name](**options)
    except TypeError as exc:
        raise ConfigError(f"bad option for the {name} curriculum: {exc}") from None
