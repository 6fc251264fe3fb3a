"""Curricula and the self-evolving generator on household: same training budget, which task source
teaches most?

Setting: the household train split (uniform over 6 task types x 3 difficulty buckets) where the
warm-started learner solves a fair share of easy tasks and almost no medium or hard ones, so most
uniformly drawn groups are all-fail (zero variance: no advantage, no gradient). Each method gets
the same budget (iterations x tasks_per_iter x group_size episodes) and the same warm start:

  uniform       split source, uniform over train tasks
  learnability  split source, p(1-p) of each task's posterior success
  sec           split source, SEC bandit over the 18 categories (TD(0) on mean |A|, Boltzmann)
  dump          split source, DUMP UCB over categories
  evolve        the self-evolving generator (pool seeded with 64 train tasks, sample / mutate /
                easier / harder proposals, retirement), learnability selection over the pool

Printed per method (mean +- std over seeds): held-out success before and after training (the
`heldout` split: same uniform distribution, unseen tasks; sampled at temperature 1), the gain as a
ratio to uniform's gain, the fraction of zero-variance groups during training, the mean |A| and
the training success rate.

LEARNER: a STAND-IN, not an LLM (benchmarks/learning/curriculum_llm.py runs the same comparison with the tiny
LLM through the trainer, at a smaller budget). The learner is a log-linear softmax policy over the
admissible actions with features of (task type, verb, whether the action names the goal object /
destination, holding something, heat/cool/clean done, revisiting a place), warm-started by
behaviour cloning on oracle episodes of a few easy train tasks and trained by policy gradient with
the advantages of the same agentgym.trainers.estimators (GRPO by default), rollouts through
agentgym.collect on the real env. It is cheap enough for 20 iterations x 8 tasks x 8 episodes per
method and seed, and answers "which task source yields more useful gradient for the same budget".

Usage: python benchmarks/learning/curriculum.py [--quick] [--seeds 0 1 2] [--iterations 20]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import defaultdict

import numpy as np

import agentgym
from agentgym.policies.base import Completion
from agentgym.registration import get_task_space
from agentgym.tasks.source import make_task_source
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages

ENV = "agentgym/Household-v0"
METHODS = {"uniform": ("split", "uniform"), "learnability": ("split", "learnability"), "sec": ("split", "sec"),
           "dump": ("split", "dump"), "evolve": ("evolve", "learnability")}
SPECIAL = {"heat", "cool", "clean"}


class FeatureSoftmaxPolicy:
    """STAND-IN learner: pi(a|s) = softmax over admissible a of sum of theta[f] for f in phi(s, a).

    Implements the Policy protocol (batched generate over TurnContexts); remembers, per
    (episode, turn), the feature sets and probabilities it sampled from, so that `update` can
    apply grad log pi(a_t|s_t) = phi(s, a_t) - E_pi[phi] weighted by each step's advantage."""

    def __init__(self, seed: int):
        self.theta: dict[tuple, float] = defaultdict(float)
        self.rng = np.random.default_rng(seed)
        self.records: dict[tuple[str, int], tuple[list[list[tuple]], np.ndarray, int]] = {}
        self.episode_state: dict[str, dict] = {}

    @staticmethod
    def features(task, action: str, holding: bool, state: dict) -> list[tuple]:
        p = task.params
        tt = p["task_type"]
        target = p.get("receptacle") or p.get("lamp")
        words = action.split()
        verb = words[0] if words else ""
        m_obj, m_tgt = p["object"] in words, target in words
        special = state["special"]
        feats = [("v", tt, verb), ("vo", tt, verb, m_obj, m_tgt), ("vs", tt, verb, m_obj, m_tgt, holding, special),
                 ("g", verb, m_obj, m_tgt, holding)]
        if verb == "go":
            feats.append(("revisit", " ".join(words[2:]) in state["visited"]))
        return feats

    def _choose(self, ctx, sample: bool = True):
        state = self.episode_state.setdefault(ctx.episode, {"special": False, "visited": set()})
        actions = ctx.info.get("admissible_actions") or ["look"]
        holding = any(a.startswith("move ") for a in actions)
        feats = [self.features(ctx.task, a, holding, state) for a in actions]
        scores = np.array([sum(self.theta.get(f, 0.0) for f in fs) for fs in feats])
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        k = int(self.rng.choice(len(actions), p=probs)) if sample else int(np.argmax(probs))
        return actions, feats, probs, k, state

    def generate(self, prompts, sampling=None, contexts=None):
        out = []
        for ctx in contexts:
            if ctx.turn == 0:
                self.episode_state.pop(ctx.episode, None)
            actions, feats, probs, k, state = self._choose(ctx)
            self.records[(ctx.episode, ctx.turn)] = (feats, probs, k)
            action = actions[k]
            words = action.split()
            if words and words[0] in SPECIAL:
                state["special"] = True
            if words[:2] == ["go", "to"]:
                state["visited"].add(" ".join(words[2:]))
            out.append(Completion(text=ctx.format_action(action) if ctx.format_action else action))
        return out

    def reset_records(self) -> None:
        self.records.clear()
        self.episode_state.clear()

    def _step(self, grads: dict, feats, probs, k: int, weight: float) -> None:
        for f in feats[k]:
            grads[f] += weight
        for fs, p in zip(feats, probs):
            for f in fs:
                grads[f] -= weight * p

    def policy_gradient(self, trajectories, advantages, lr: float) -> None:
        grads: dict = defaultdict(float)
        live = [i for i, t in enumerate(trajectories) if not t.infra_error]
        for i in live:
            for t, a in enumerate(advantages[i]):
                rec = self.records.get((str(i), t))
                if rec is not None and a != 0.0:
                    self._step(grads, *rec, float(a))
        scale = lr / max(len(live), 1)
        for f, g in grads.items():
            self.theta[f] += scale * g

    def behaviour_cloning(self, space, tasks, epochs: int, lr: float) -> None:
        """Warm start: raise log pi of the oracle's action at every state of the oracle's episodes."""
        from agentgym.policies import OraclePolicy

        for _ in range(epochs):
            self.reset_records()
            trajs = agentgym.collect(ENV, tasks, _Recorder(self, OraclePolicy(space), space), group_size=1,
                                     record_messages=False)
            ones = [np.ones(len(t.steps)) for t in trajs]
            self.policy_gradient(trajs, ones, lr)


class _Recorder:
    """Plays the oracle's actions while the learner records its own features and probabilities
    for them (the behaviour-cloning gradient is grad log pi(oracle action))."""

    def __init__(self, learner: FeatureSoftmaxPolicy, oracle, space):
        self.learner, self.oracle, self.space = learner, oracle, space
        self.plans: dict[str, list[str]] = {}

    def generate(self, prompts, sampling=None, contexts=None):
        comps = self.oracle.generate(prompts, sampling, contexts)
        for ctx, comp in zip(contexts, comps):
            if ctx.turn == 0:
                self.learner.episode_state.pop(ctx.episode, None)
            actions, feats, probs, _, state = self.learner._choose(ctx)
            plan = self.plans.setdefault(ctx.task.task_id, self.space.solve(ctx.task))
            action = plan[ctx.turn] if ctx.turn < len(plan) else "look"
            if action in actions:
                self.learner.records[(ctx.episode, ctx.turn)] = (feats, probs, actions.index(action))
            words = action.split()
            if words and words[0] in SPECIAL:
                state["special"] = True
            if words[:2] == ["go", "to"]:
                state["visited"].add(" ".join(words[2:]))
        return comps


def heldout_success(policy: FeatureSoftmaxPolicy, tasks, episodes: int, seed: int, space) -> tuple[float, dict]:
    """Success rate on the held-out tasks, overall and by difficulty bucket."""
    policy.reset_records()
    saved = policy.rng
    policy.rng = np.random.default_rng([seed, 99])  # the same evaluation draws for every method
    trajs = agentgym.collect(ENV, tasks, policy, group_size=episodes, seed=10_000 + seed, record_messages=False)
    policy.rng = saved
    policy.reset_records()
    by_level = defaultdict(list)
    for t in trajs:
        by_level[space.category(agentgym.TaskSpec.from_dict(t.task)).split("/")[-1]].append(t.success)
    return float(np.mean([t.success for t in trajs])), {k: float(np.mean(v)) for k, v in by_level.items()}


def warm_start(space, seed: int, args) -> dict:
    policy = FeatureSoftmaxPolicy(seed)
    easy = [t for t in space.split("train") if space.category(t).endswith("/easy")]
    rng = np.random.default_rng([seed, 1])
    picks = [easy[int(i)] for i in rng.choice(len(easy), size=args.bc_tasks, replace=False)]
    policy.behaviour_cloning(space, picks, epochs=args.bc_epochs, lr=args.bc_lr)
    return dict(policy.theta)


def run(method: str, seed: int, theta0: dict, space, eval_tasks, args) -> dict:
    kind, curriculum = METHODS[method]
    policy = FeatureSoftmaxPolicy(seed)
    policy.theta.update(theta0)
    source = make_task_source(kind, space, space.split("train"), curriculum=curriculum, seed=seed,
                              seed_tasks=64, new_per_round=args.tasks_per_iter // 2, min_active=4 * args.tasks_per_iter)
    est = EstimatorConfig(name=args.estimator, outcome="success")
    zero_var, abs_adv, train_succ = [], [], []
    t0 = time.perf_counter()
    for it in range(args.iterations):
        tasks = source.next_tasks(args.tasks_per_iter)
        policy.reset_records()
        trajs = agentgym.collect(ENV, tasks, policy, group_size=args.group_size, seed=seed * 1000 + it,
                                 record_messages=False)
        advantages = compute_advantages(trajs, est)
        metrics = source.update(trajs, advantages)
        policy.policy_gradient(trajs, advantages, args.lr)
        zero_var.append(metrics["zero_variance_frac"])
        abs_adv.append(metrics["mean_abs_adv"])
        train_succ.append(float(np.mean([t.success for t in trajs])))
    after, by_level = heldout_success(policy, eval_tasks, args.eval_episodes, seed, space)
    out = {"heldout_after": after, "by_level": by_level,
           "zero_var": float(np.mean(zero_var)), "abs_adv": float(np.mean(abs_adv)),
           "train_success": float(np.mean(train_succ)), "seconds": time.perf_counter() - t0}
    if kind == "evolve":
        out["pool"] = source.pool.summary()
        out["generator"] = {k: v for k, v in source.generator.stats.items() if v}
    return out


def mean_std(values) -> str:
    values = list(values)
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 seed, 8 iterations, fewer eval tasks")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--tasks-per-iter", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.25)
    ap.add_argument("--estimator", default="grpo")
    ap.add_argument("--eval-per-category", type=int, default=6, help="held-out tasks per category (18 categories)")
    ap.add_argument("--eval-episodes", type=int, default=2)
    ap.add_argument("--bc-tasks", type=int, default=6)
    ap.add_argument("--bc-epochs", type=int, default=1)
    ap.add_argument("--bc-lr", type=float, default=0.3)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.iterations, args.eval_per_category = args.seeds[:1], 8, 3

    space = get_task_space(ENV)
    by_cat = defaultdict(list)
    for t in space.split("heldout"):
        by_cat[space.category(t)].append(t)
    eval_tasks = [t for cat in sorted(by_cat) for t in by_cat[cat][: args.eval_per_category]]
    budget = args.iterations * args.tasks_per_iter * args.group_size
    print(f"household curricula, STAND-IN learner (log-linear softmax over admissible actions, not an LLM); "
          f"budget {budget} episodes per run ({args.iterations} it x {args.tasks_per_iter} tasks x "
          f"{args.group_size}), estimator {args.estimator}, seeds {args.seeds}, held-out: {len(eval_tasks)} tasks "
          f"x {args.eval_episodes} episodes from the uniform heldout split")
    results: dict[str, list[dict]] = defaultdict(list)
    before: list[float] = []
    for seed in args.seeds:
        theta0 = warm_start(space, seed, args)
        warm = FeatureSoftmaxPolicy(seed)
        warm.theta.update(theta0)
        overall, by_level = heldout_success(warm, eval_tasks, args.eval_episodes, seed, space)
        before.append(overall)
        print(f"seed {seed}: warm start held-out success {before[-1]:.3f} "
              f"(easy {by_level['easy']:.2f}, medium {by_level['medium']:.2f}, hard {by_level['hard']:.2f})")
        for method in args.methods:
            r = run(method, seed, theta0, space, eval_tasks, args)
            results[method].append(r)
            levels = "/".join(f"{r['by_level'][k]:.2f}" for k in ("easy", "medium", "hard"))
            print(f"  {method:13s} held-out {r['heldout_after']:.3f} (e/m/h {levels})  zero-var groups {r['zero_var']:.3f}  "
                  f"mean|A| {r['abs_adv']:.3f}  train success {r['train_success']:.3f}  ({r['seconds']:.0f}s)"
                  + (f"  pool {r['pool']}" if "pool" in r else ""), flush=True)

    base_gain = statistics.mean(r["heldout_after"] for r in results.get("uniform", [])) - statistics.mean(before) \
        if "uniform" in results else float("nan")
    print()
    print(f"| method | held-out success (before {mean_std(before)}) | gain / uniform gain | held-out easy / medium / "
          f"hard | zero-variance groups | mean abs adv | train success |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for method, rs in results.items():
        gain = statistics.mean(r["heldout_after"] for r in rs) - statistics.mean(before)
        ratio = gain / base_gain if base_gain and not math.isnan(base_gain) and abs(base_gain) > 1e-9 else float("nan")
        levels = " / ".join(f"{statistics.mean(r['by_level'][k] for r in rs):.2f}" for k in ("easy", "medium", "hard"))
        print(f"| {method} | {mean_std(r['heldout_after'] for r in rs)} | {ratio:.2f} | {levels} | "
              f"{mean_std(r['zero_var'] for r in rs)} | {mean_std(r['abs_adv'] for r in rs)} | "
              f"{mean_std(r['train_success'] for r in rs)} |")


if __name__ == "__main__":
    main()
