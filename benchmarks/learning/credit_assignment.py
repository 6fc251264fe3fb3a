"""Credit assignment on household (medium, six task types): GRPO, RLOO, LOOP, PPO, GiGPO and SPA.

Default learner: a FAST CONTROLLED LEARNER, not an LLM (benchmarks/learning/action_scorer.py): a small
neural scorer over the admissible actions that reads the instruction, the ChatEnv memory of
its own past actions and the current observation; policy = softmax over the admissible
actions. It is trained through the library's own pieces: rollouts by `agentgym.collect` on
`agentgym/Household-v0` (real Trajectory objects, anchors from the env), advantages by
`agentgym.trainers.estimators.compute_advantages`, updates by `agentgym.trainers.ppo.ppo_clip_loss`
(the chosen action's log-prob is one "token" with mask 1), the trainer's ValueHead (ppo) and
ProgressHead/fit_progress (spa). One warm start (behaviour cloning on the searching expert) is
built once and shared by every run; every (estimator, seed) pair sees the same training tasks
for the same seed. The FINAL held-out evaluation of every run is reported (never the best seen).

    python benchmarks/learning/credit_assignment.py --quick          # smoke run, ~1-2 minutes
    python benchmarks/learning/credit_assignment.py                  # the committed docs/credit_assignment.json/.png
    python benchmarks/learning/credit_assignment.py --llm --quick    # the old tiny-LLM mode (household-tiny preset)

Writes docs/credit_assignment.json and docs/credit_assignment.png (full run; --out for others)
and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

ESTIMATORS = ("grpo", "rloo", "loop", "ppo", "gigpo", "spa", "gigpo_omega0", "gigpo_std")
TASK_TYPES = ("pick_and_place", "pick_clean_then_place", "pick_heat_then_place", "pick_cool_then_place",
              "look_at_obj_in_light", "pick_two_obj_and_place")
ENV_ID = "agentgym/Household-v0"
LEVEL = "medium"

# What makes each method itself beyond its advantage (ALGORITHMS.md; the same table as the LLM
# mode's PER_ESTIMATOR below): LOOP trains 2 epochs with an asymmetric clip and no std
# normalization; GRPO divides by the group std; RLOO and GiGPO do not (the preset's GiGPO).
SCORER_PER_ESTIMATOR = {
    "grpo": {"est": {"norm_std": True}},
    "rloo": {"est": {"norm_std": False}},
    "loop": {"est": {"norm_std": False}, "epochs": 2, "asymmetric_clip": True},
    "gigpo": {"est": {"norm_std": False, "omega": 1.0}},
    "ppo": {"est": {"lam": 1.0}},
    # Every action the scorer can take is admissible, so SPA's grounding bonus (a reward for an
    # executable action) carries no information here, only a bonus per step survived that would
    # swamp the outcome: it is set to 0 (SPA = progress-attributed returns, group baseline).
    "spa": {"est": {"grounding_bonus": 0.0}},
    # GiGPO's two differences from GRPO apart: without its step term (omega 0, which is GRPO without
    # std normalization) and with GRPO's std normalization
    "gigpo_omega0": {"est": {"name": "gigpo", "norm_std": False, "omega": 0.0}},
    "gigpo_std": {"est": {"name": "gigpo", "norm_std": True, "omega": 1.0}},
}
# paired by seed: (name, a, b) for a - b; GiGPO - GRPO = step term + dropping std
DIFFERENCES = (("gigpo_minus_grpo", "gigpo", "grpo"),
               ("step_term_without_std", "gigpo", "gigpo_omega0"),
               ("step_term_with_std", "gigpo_std", "grpo"),
               ("dropping_std_without_step_term", "gigpo_omega0", "grpo"),
               ("dropping_std_with_step_term", "gigpo", "gigpo_std"))
PER_ESTIMATOR = {"loop": ["ppo.epochs=2", "ppo.asymmetric_clip=true", "estimator.norm_std=false"],
                 "rloo": ["estimator.norm_std=false"], "grpo": ["estimator.norm_std=true"]}


# --- setting ------------------------------------------------------------------------------------
def chat_options(memory: int) -> dict:
    return {"parser": "raw", "history": 0, "system_prompt": "", "show_admissible": False,
            "memory": memory, "memory_max_words": 12 * memory}


def heldout_tasks(space, n: int) -> list:
    from agentgym.trainers.task_selection import filter_tasks

    cats = [f"{t}/{LEVEL}" for t in TASK_TYPES]
    tasks = filter_tasks(space.split("heldout"), {}, cats, space)
    # round-robin over the task types so a short list still covers all six
    by_type: dict[str, list] = {}
    for t in tasks:
        by_type.setdefault(t.params["task_type"], []).append(t)
    out = []
    while len(out) < min(n, len(tasks)):
        for tt in TASK_TYPES:
            if by_type.get(tt):
                out.append(by_type[tt].pop(0))
    return out[:n]


def train_tasks(space, rng: np.random.Generator, n: int) -> list:
    """Fresh generator tasks (seen goal combinations, the train side of the split; a sampled
    task colliding with a held-out one has probability ~0)."""
    return [space.sample(rng, task_type=str(tt), level=LEVEL) for tt in rng.choice(TASK_TYPES, size=n)]


# --- rollouts, warm start, evaluation -------------------------------------------------------------
class RecordingExpert:
    """The searching expert (OraclePolicy(search=True)) that also records each decision for BC."""

    def __init__(self, space, buckets: int, seed: int):
        from agentgym.policies.scripted import OraclePolicy

        self.expert = OraclePolicy(space, search=True, seed=seed)
        self.buckets = buckets
        self.data = []

    def generate(self, prompts, sampling=None, contexts=None):
        from benchmarks.learning.action_scorer import action_features, state_features, state_view, Decision

        out = self.expert.generate(prompts, sampling, contexts)
        for prompt, ctx, comp in zip(prompts, contexts, out):
            actions = list(ctx.info.get("admissible_actions") or [])
            if comp.text in actions:
                sids, sctx = state_features(state_view(prompt, ctx), self.buckets)
                self.data.append(Decision(sids, [action_features(a, sctx, self.buckets) for a in actions], actions,
                                          actions.index(comp.text)))
        return out


def behaviour_clone(scorer, space, args, log) -> dict:
    import torch
    from agentgym.rollout import collect

    rng = np.random.default_rng(12345)
    expert = RecordingExpert(space, scorer.buckets, seed=1)
    collect(ENV_ID, train_tasks(space, rng, args.bc_tasks), expert, 1, seed=777,
            env_kwargs={"max_episode_steps": args.max_steps}, chat=chat_options(args.memory), record_messages=False)
    data = expert.data
    from benchmarks.learning.action_scorer import chosen_logprobs

    opt = torch.optim.Adam(scorer.parameters(), lr=args.bc_lr)
    losses = []
    for step in range(args.bc_steps):
        idx = rng.choice(len(data), size=min(args.bc_batch, len(data)), replace=False)
        logp, _, _ = chosen_logprobs(scorer, [data[i] for i in idx])
        loss = -logp.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    log(f"warm start: BC on {len(data)} searching-expert decisions ({args.bc_tasks} tasks), {args.bc_steps} steps, "
        f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f}")
    return {k: v.detach().clone() for k, v in scorer.state_dict().items()}


def evaluate(scorer, tasks, args, seed: int, episodes: int | None = None) -> float:
    from agentgym.rollout import collect
    from benchmarks.learning.action_scorer import ScorerPolicy

    policy = ScorerPolicy(scorer, seed=seed, record=False)
    trajs = collect(ENV_ID, tasks, policy, episodes or args.eval_episodes, seed=seed, env_kwargs={"max_episode_steps": args.max_steps},
                    chat=chat_options(args.memory), record_messages=False)
    return float(np.mean([t.success for t in trajs]))


# --- one RL run ------------------------------------------------------------------------------------
def rl_run(estimator: str, seed: int, warm: dict, space, eval_set, args, log, warm_heldout: float) -> dict:
    import torch
    from agentgym.rollout import collect
    from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
    from agentgym.trainers.ppo import ValueHead, clip_range, ppo_clip_loss
    from agentgym.trainers.spa_progress import ProgressHead, fit_progress, predict_progress
    from benchmarks.learning.action_scorer import ActionScorer, ScorerPolicy, chosen_logprobs

    per = SCORER_PER_ESTIMATOR.get(estimator, {})
    torch.manual_seed(seed)
    scorer = ActionScorer(args.buckets, args.dim, args.hidden)
    scorer.load_state_dict(warm)
    value_head = ValueHead(args.hidden) if estimator == "ppo" else None
    progress_head = ProgressHead(2 * args.hidden) if estimator == "spa" else None
    groups = [{"params": list(scorer.parameters()), "lr": args.lr}]
    if value_head is not None:
        groups.append({"params": list(value_head.parameters()), "lr": args.value_lr})
    opt = torch.optim.Adam(groups)
    est_cfg = EstimatorConfig(**{"name": estimator, "gamma": args.gamma, "invalid_penalty": 0.1, "outcome": "success",
                                 **per.get("est", {})})
    lo, hi = clip_range(args.clip_eps, per.get("asymmetric_clip", False))
    epochs = per.get("epochs", 1)
    policy = ScorerPolicy(scorer, seed=seed)
    curve = {"iteration": [], "heldout": [], "train_iteration": [], "train_success": []}
    t0 = time.perf_counter()

    def do_eval(it, episodes=None):
        curve["iteration"].append(it)
        curve["heldout"].append(evaluate(scorer, eval_set, args, seed=10_000 + it, episodes=episodes))

    for it in range(args.iterations):
        if it == 0:  # the shared warm start, evaluated once with the same eval seed
            curve["iteration"].append(0)
            curve["heldout"].append(warm_heldout)
        elif it % args.eval_every == 0:  # mid-run points of the curve: fewer episodes (the final one has all)
            do_eval(it, args.curve_episodes)
        rng = np.random.default_rng([seed, it])  # same tasks for every estimator at this seed
        tasks = train_tasks(space, rng, args.tasks_per_iter)
        policy.records.clear()
        trajs = collect(ENV_ID, tasks, policy, args.group_size, seed=int(rng.integers(2**31)),
                        env_kwargs={"max_episode_steps": args.max_steps}, chat=chat_options(args.memory),
                        record_messages=False)
        curve["train_iteration"].append(it)
        curve["train_success"].append(float(np.mean([t.success for t in trajs])))
        decisions = [[policy.records[(str(i), k)] for k in range(len(t.steps))] for i, t in enumerate(trajs)]
        flat = [d for ds in decisions for d in ds]
        old = torch.tensor([s.response_logprobs[0] for t in trajs for s in t.steps], dtype=torch.float32)
        values = progress = None
        if value_head is not None or progress_head is not None:
            with torch.no_grad():
                _, h, e = chosen_logprobs(scorer, flat)
            lengths = [len(t.steps) for t in trajs]
            if value_head is not None:
                with torch.no_grad():
                    v = value_head(h).numpy().astype(np.float64)
                values = np.split(v, np.cumsum(lengths)[:-1])
            if progress_head is not None:
                feats = torch.split(torch.cat([h, e], -1).detach(), lengths)
                live = [i for i, t in enumerate(trajs) if t.steps and not t.infra_error]
                fit_progress(progress_head, [feats[i] for i in live], [float(trajs[i].success) for i in live],
                             epochs=50, lr=1e-2, seed=seed + it)
                progress = predict_progress(progress_head, list(feats))
        adv = compute_advantages(trajs, est_cfg, values=values, progress=progress)
        adv_flat = np.concatenate(adv).astype(np.float32)
        returns = (adv_flat + np.concatenate(values)).astype(np.float32) if values is not None else None
        keep = np.flatnonzero(np.abs(adv_flat) >= 1e-6) if returns is None else np.arange(len(flat))
        if len(keep) == 0:
            continue
        for _ in range(epochs):
            order = np.random.default_rng([seed, it, _]).permutation(keep)
            n_mb = max(1, round(len(order) / args.minibatch))  # equal-size minibatches, no remainder step
            for mb in np.array_split(order, n_mb):
                logp, h, _e = chosen_logprobs(scorer, [flat[j] for j in mb])
                a = torch.from_numpy(adv_flat[mb])[:, None]
                loss, st = ppo_clip_loss(logp[:, None], old[mb][:, None], a, torch.ones_like(a), lo, hi)
                if value_head is not None:
                    loss = loss + 0.5 * ((value_head(h) - torch.from_numpy(returns[mb])) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
                opt.step()
    do_eval(args.iterations)
    secs = time.perf_counter() - t0
    log(f"{estimator} seed {seed}: held-out {curve['heldout'][0]:.3f} -> {curve['heldout'][-1]:.3f}  "
        f"(train {np.mean(curve['train_success'][:3]):.2f} -> {np.mean(curve['train_success'][-3:]):.2f}, {secs:.0f}s)")
    return {"estimator": estimator, "seed": seed, "final": curve["heldout"][-1], "curve": curve, "seconds": secs}


# --- statistics, table, plot ----------------------------------------------------------------------
def t_ci(x, level: float = 0.95) -> tuple[float, float, float]:
    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, m, m
    try:
        from scipy import stats

        q = float(stats.t.ppf(0.5 + level / 2, len(x) - 1))
    except ImportError:  # 95% t quantiles
        q = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}.get(len(x) - 1, 2.0)
    half = q * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, m - half, m + half


def summarize(results: dict, setting: dict, warm_heldout: float) -> dict:
    est = {}
    for name, runs in results.items():
        finals = [r["final"] for r in sorted(runs, key=lambda r: r["seed"])]
        m, lo, hi = t_ci(finals)
        est[name] = {"finals": finals, "mean": m, "ci": [lo, hi],
                     "seeds": [r["seed"] for r in sorted(runs, key=lambda r: r["seed"])]}
    out = {"setting": setting, "warm_start_heldout": warm_heldout, "estimators": est}
    for key, a, b in DIFFERENCES:
        if a in results and b in results:
            fa = {r["seed"]: r["final"] for r in results[a]}
            fb = {r["seed"]: r["final"] for r in results[b]}
            seeds = sorted(set(fa) & set(fb))
            d, lo, hi = t_ci([fa[s] - fb[s] for s in seeds])
            out[key] = {"diff": d, "ci": [lo, hi], "a": a, "b": b,
                        "method": f"paired by seed (same training tasks and eval tasks per seed), t-interval over "
                                  f"{len(seeds)} seed differences"}
    return out


def table(summary: dict) -> str:
    lines = ["| estimator | held-out success per seed (final) | mean | 95% CI |", "| --- | --- | --- | --- |"]
    for name, e in summary["estimators"].items():
        lines.append(f"| {name} | {' '.join(f'{x:.3f}' for x in e['finals'])} | {e['mean']:.3f} | "
                     f"[{e['ci'][0]:.3f}, {e['ci'][1]:.3f}] |")
    for key, a, b in DIFFERENCES:
        if key in summary:
            g = summary[key]
            lines.append(f"\n{key}: {a} - {b} {g['diff']:+.3f} [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}] ({g['method']})")
    lines.append(f"\nwarm start {summary['warm_start_heldout']:.3f}")
    return "\n".join(lines)


def plot(results: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, runs in results.items():
        for ax, xk, yk, smooth in ((axes[0], "iteration", "heldout", 1), (axes[1], "train_iteration", "train_success", 3)):
            x = np.array(runs[0]["curve"][xk])
            ys = np.array([r["curve"][yk] for r in runs])
            if smooth > 1:  # running mean over 3 iterations (training batches are small)
                k = np.ones(smooth) / smooth
                ys = np.array([np.convolve(np.pad(y, (smooth - 1, 0), mode="edge"), k, mode="valid") for y in ys])
            bands = np.array([t_ci(ys[:, j]) for j in range(ys.shape[1])])  # mean, lo, hi per point
            line, = ax.plot(x, bands[:, 0], label=name, marker="o" if yk == "heldout" else None, ms=3)
            ax.fill_between(x, bands[:, 1], bands[:, 2], color=line.get_color(), alpha=0.12)
    axes[0].set_title("held-out success (final = rightmost point)")
    axes[1].set_title("training success (3-iteration running mean)")
    for ax in axes:
        ax.set_xlabel("RL iteration")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success (mean over seeds, 95% CI band)")
    axes[0].legend()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- main ------------------------------------------------------------------------------------------
def scorer_main(args) -> None:
    import torch

    torch.set_num_threads(1)
    from agentgym.registration import get_task_space
    from benchmarks.learning.action_scorer import ActionScorer

    log = lambda s: print(s, flush=True)  # noqa: E731
    space = get_task_space(ENV_ID)
    eval_set = heldout_tasks(space, args.eval_tasks)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    scorer = ActionScorer(args.buckets, args.dim, args.hidden)
    warm = behaviour_clone(scorer, space, args, log)
    warm_heldout = evaluate(scorer, eval_set, args, seed=10_000)
    log(f"warm start held-out success {warm_heldout:.3f} on {len(eval_set)} tasks x {args.eval_episodes} "
        f"({time.perf_counter() - t0:.0f}s)")
    setting = {
        "env": f"{ENV_ID}, level {LEVEL} (5-8 receptacles, 2-5 distractors, 25-50% of containers closed)",
        "categories": [f"{t}/{LEVEL}" for t in TASK_TYPES],
        "step_limit": args.max_steps,
        "learner": (f"FAST CONTROLLED LEARNER, not an LLM: a neural action scorer (hashed features of instruction, "
                    f"memory of own past actions (ChatEnv memory={args.memory}) and observation; EmbeddingBag dim "
                    f"{args.dim} + MLP hidden {args.hidden}; softmax over admissible actions), behaviour-cloned on "
                    f"the searching expert ({args.bc_tasks} tasks, {args.bc_steps} steps) as the shared warm start, "
                    f"then trained by agentgym's compute_advantages + ppo_clip_loss (Adam lr {args.lr}, clip "
                    f"{args.clip_eps}, minibatch {args.minibatch})"),
        "rollout": f"{args.iterations} iterations x {args.tasks_per_iter} fresh train tasks x group {args.group_size}, "
                   f"sampled at T=1; outcome = success, gamma {args.gamma}",
        "eval": f"{len(eval_set)} heldout-split tasks of these categories x {args.eval_episodes} sampled episodes (T=1); "
                f"final evaluation of every run (never the best); mid-run curve points with {args.curve_episodes} "
                f"episode(s) per task every {args.eval_every} iterations",
        "per_estimator": SCORER_PER_ESTIMATOR,
        "command": command(__file__, sys.argv[1:]),
    }
    results: dict[str, list] = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    raw = out / ("credit_assignment_runs.json" if args.out == "docs" else "runs.json")
    if args.out == "docs":
        raw = Path("runs/credit_assignment/runs.json")
        raw.parent.mkdir(parents=True, exist_ok=True)
    for seed in range(args.seeds):  # seed-major: a partial run still has every estimator
        for est in args.estimators.split(","):
            results.setdefault(est, []).append(rl_run(est, seed, warm, space, eval_set, args, log, warm_heldout))
            raw.write_text(json.dumps(results))
    summary = summarize(results, setting, warm_heldout)
    summary["wall_s"] = time.perf_counter() - t0
    (out / "credit_assignment.json").write_text(json.dumps(summary, indent=1))
    plot(results, out / "credit_assignment.png",
         f"household {LEVEL}, 6 task types, {args.max_steps}-step limit; fast controlled learner (action scorer, "
         f"not an LLM); {args.seeds} seeds; warm start {warm_heldout:.2f}")
    print()
    print(table(summary))
    print(f"\n{out / 'credit_assignment.json'}, {out / 'credit_assignment.png'}; raw curves {raw}; "
          f"total {time.perf_counter() - t0:.0f}s")


def llm_main(args) -> None:
    """The old mode: the household-tiny preset's tiny LLM, one SFT warm start, every estimator."""
    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import train
    from agentgym.trainers.run_setup import prepare_start_model, quiet_transformers

    quiet_transformers()
    out = Path(args.out if args.out != "docs" else "runs/credit_assignment_llm")
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_config("household-tiny", [f"run_dir={out / 'warm_start'}", *args.overrides])
    (out / "warm_start").mkdir(parents=True, exist_ok=True)
    model_dir, _ = prepare_start_model(cfg, out / "warm_start", log=lambda s: print(s, flush=True))
    iterations = 6 if args.quick else args.iterations
    results = {}
    for est in args.estimators.split(","):
        for seed in range(args.seeds):
            cfg = load_config("household-tiny", [
                f"policy.model={model_dir}", "tiny.build=false", "sft.enabled=false", f"estimator.name={est}",
                f"seed={seed}", f"run_dir={out / f'{est}_seed{seed}'}", f"iterations={iterations}",
                f"eval.every={args.eval_every}", "time_budget_s=null", "checkpoint_every=0",
                *PER_ESTIMATOR.get(est, []), *args.overrides])
            s = train(cfg, log=lambda s: None)
            results.setdefault(est, []).append({"seed": seed, "final": s["heldout_success_after"]})
            print(f"{est} seed {seed}: held-out {s['heldout_success_before']:.3f} -> {s['heldout_success_after']:.3f}",
                  flush=True)
    summary = summarize(results, {"learner": "household-tiny tiny LLM"}, float("nan"))
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    print(table(summary))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 seeds, few iterations, small eval")
    ap.add_argument("--llm", action="store_true", help="the old tiny-LLM mode (household-tiny preset; slow)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--tasks-per-iter", type=int, default=6)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=30, help="the env's step limit")
    ap.add_argument("--memory", type=int, default=20, help="ChatEnv memory: past actions shown to the learner")
    ap.add_argument("--eval-tasks", type=int, default=102, help="heldout tasks (all 102 of the six medium categories)")
    ap.add_argument("--eval-episodes", type=int, default=2, help="episodes per held-out task, final evaluation")
    ap.add_argument("--curve-episodes", type=int, default=1, help="episodes per held-out task, mid-run curve points")
    ap.add_argument("--bc-tasks", type=int, default=40)
    ap.add_argument("--bc-steps", type=int, default=8, help="few on purpose: a warm start that succeeds ~35%% of the time")
    ap.add_argument("--bc-batch", type=int, default=128)
    ap.add_argument("--bc-lr", type=float, default=3e-3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--value-lr", type=float, default=1e-3)
    ap.add_argument("--clip-eps", type=float, default=0.2)
    ap.add_argument("--minibatch", type=int, default=256)
    ap.add_argument("--gamma", type=float, default=0.95)
    ap.add_argument("--buckets", type=int, default=1 << 15)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--out", default="docs", help="folder for credit_assignment.json/.png")
    ap.add_argument("overrides", nargs="*", help="--llm only: config overrides for every run")
    args = ap.parse_args()
    if args.llm:
        if args.out == "docs":
            args.out = "runs/credit_assignment_llm"
        return llm_main(args)
    if args.quick:
        args.seeds, args.iterations, args.eval_every = min(args.seeds, 1), 2, 1
        args.eval_tasks, args.eval_episodes, args.tasks_per_iter, args.group_size = 12, 1, 3, 4
        if args.out == "docs":
            args.out = "runs/credit_assignment_quick"
    scorer_main(args)


if __name__ == "__main__":
    main()
