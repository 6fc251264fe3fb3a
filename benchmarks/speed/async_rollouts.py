"""Asynchronous rollouts: seconds per iteration and held-out success for rollout.max_staleness 0, 1, 2.

The env is household behind a fixed per-step latency, standing for a remote env server that
answers one request at a time (a web page loading, a sandbox running tests): the rollout waits
on it while the CPU is idle, which is what overlapping generation with the update can win back.
With --latencies 0 the same runs measure the compute-bound case (a tiny model on a shared 2-core
CPU), where the producer thread and the update compete for the same cores.

The synchronous baseline is run with each executor of --executors: "inprocess" steps the envs one
after another, so a per-step latency adds up over the batch; "threads" steps them concurrently
(what a synchronous trainer should use for an env that waits on I/O), so only asynchrony's own
gain is left in the ratio, which is taken against the fastest K = 0 of the same latency.

All runs start from one warm start (the household-tiny preset's tiny model + a short SFT, built
once or passed with --warm-start), train the same number of iterations with the same seeds and
estimator, and are evaluated on the plain household env (no latency: same tasks, same dynamics)
over all held-out tasks of the preset's categories, 4 sampled episodes each. Seconds per
iteration are measured over the RL loop only (evaluations excluded); the ratio is against
max_staleness 0 of the same latency, measured in the same run.

    python benchmarks/speed/async_rollouts.py --torch-threads 1 rollout.tasks_per_iter=4   # 0.05 s per step, K = 0, 1, 2
    python benchmarks/speed/async_rollouts.py --latencies 0,0.05 --staleness 0,1 --executors inprocess,threads
    python benchmarks/speed/async_rollouts.py --warm-start runs/household-tiny/sft_model
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import time
from pathlib import Path

REMOTE_ID = "agentgym/HouseholdRemote-v0"


def register_remote_household() -> str:
    from agentgym.envs.household.env import HouseholdEnv
    from agentgym.registration import register_env

    class RemoteHousehold(HouseholdEnv):
        """Household whose every reset and step first waits `latency_s` (a stand-in for a remote server)."""

        def __init__(self, latency_s: float = 0.0, **kwargs):
            super().__init__(**kwargs)
            self.latency_s = latency_s

        def reset(self, *args, **kwargs):
            time.sleep(self.latency_s)
            return super().reset(*args, **kwargs)

        def step(self, action):
            time.sleep(self.latency_s)
            return super().step(action)

    return register_env(REMOTE_ID, RemoteHousehold, max_episode_steps=50,
                        description="household behind a per-step latency (benchmark only)")


def warm_start(out: Path, sft_tasks: int, sft_epochs: int, hidden: int) -> Path:
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import quiet_transformers, prepare_start_model

    quiet_transformers()
    cfg = load_config("household-tiny", [f"run_dir={out / 'warm_start'}", f"sft.num_tasks={sft_tasks}",
                                         f"sft.epochs={sft_epochs}", f"tiny.hidden={hidden}", "tiny.heads=4"])
    (out / "warm_start").mkdir(parents=True, exist_ok=True)
    model_dir, _ = prepare_start_model(cfg, out / "warm_start", log=lambda s: print(s, flush=True))
    return model_dir


_BEFORE_RL: dict = {}  # the held-out evaluation of the warm start, shared by the runs that start from it


def run_one(out: Path, model_dir: Path, staleness: int, latency: float, iterations: int, seed: int,
            overrides: list[str], executor: str = "inprocess") -> dict:
    from agentgym.trainers import training
    from agentgym.trainers.config import load_config

    run_dir = out / f"lat{latency:g}_K{staleness}_{executor}"
    cfg = load_config("household-tiny", [
        f"policy.model={model_dir}", "tiny.build=false", "sft.enabled=false", f"env.id={REMOTE_ID}",
        f"env.executor={executor}",
        f"env.env_kwargs.latency_s={latency}", f"rollout.max_staleness={staleness}", f"seed={seed}",
        f"run_dir={run_dir}", f"iterations={iterations}", "eval.every=0", "time_budget_s=null",
        "checkpoint_every=0", "log.plot=false", *overrides,
    ])
    evaluate_now, heldout_result = training._evaluate_now, training.heldout_result

    def plain_env_heldout(eval_cfg, env_cfg, *args):  # held-out success without the latency
        env = dataclasses.replace(env_cfg, id="agentgym/Household-v0",
                                  env_kwargs={k: v for k, v in env_cfg.env_kwargs.items() if k != "latency_s"})
        return heldout_result(eval_cfg, env, *args)

    def cached_eval(evaluate, log_cfg, run_dir, policy, state, *args):
        if state["iteration"] == 0 and model_dir in _BEFORE_RL:  # every run starts from the same weights and seed
            ev = copy.deepcopy(_BEFORE_RL[model_dir])
            state["evals"].append({"iteration": 0, **ev})
            return ev
        ev = evaluate_now(evaluate, log_cfg, run_dir, policy, state, *args)
        if state["iteration"] == 0:
            _BEFORE_RL[model_dir] = copy.deepcopy(ev)
        return ev

    per_iter: list[dict] = []
    training._evaluate_now, training.heldout_result = cached_eval, plain_env_heldout
    try:
        summary = training.train(cfg, log=lambda s: None, on_iteration=per_iter.append)
    finally:
        training._evaluate_now, training.heldout_result = evaluate_now, heldout_result
    seconds = [m["time"]["iteration_s"] for m in per_iter]
    a = [m.get("async", {}) for m in per_iter]
    hist: dict = {}
    for x in a:
        for k, v in x.get("staleness", {}).items():
            hist[k] = hist.get(k, 0) + v
    return {
        "staleness": staleness, "latency_s": latency, "executor": executor, "iterations": len(per_iter),
        "seconds_per_iteration": sum(seconds) / max(len(seconds), 1), "iteration_s": seconds,
        "trainer_wait_s": sum(x.get("trainer_wait_s", m["time"]["rollout_s"]) for x, m in zip(a, per_iter)),
        "rollout_wait_s": sum(x.get("rollout_wait_s", 0.0) for x in a),
        "update_s": sum(m["time"]["update_s"] for m in per_iter),
        "staleness_hist": hist,
        "is_weight_mean": [m["train"].get("is_weight_mean") for m in per_iter],
        "is_truncated_frac": [m["train"].get("is_truncated_frac") for m in per_iter],
        "heldout_before": summary["heldout_success_before"], "heldout_after": summary["heldout_success_after"],
        "rollout_success": [m["rollout"]["success_rate"] for m in per_iter],
        "eval_episodes": _last_eval_episodes(run_dir),
        "heldout_per_task_after": _last_per_task_success(run_dir),
    }


def _last_eval_episodes(run_dir: Path) -> int:
    episodes = 0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        episodes = json.loads(line).get("eval/episodes", episodes)
    return int(episodes)


def _last_per_task_success(run_dir: Path) -> dict[str, float]:
    """Per-task held-out success of the final evaluation (metrics.jsonl keeps one per eval)."""
    prefix, last = "eval/per_task_success/", {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        tasks = {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix)}
        last = tasks or last
    return last


def paired_against_synchronous(results: list[dict]) -> None:
    """Adds to each K > 0 run its final held-out success minus K = 0's on the same tasks, with a
    paired per-task bootstrap interval: the question is whether staleness costs success."""
    from agentgym.evaluation.stats import paired_gain

    sync = {r["latency_s"]: r["heldout_per_task_after"] for r in results
            if r["staleness"] == 0 and r is _fastest_sync(results, r["latency_s"])}
    for r in results:
        if r["staleness"] > 0 and r["latency_s"] in sync:
            est = paired_gain(sync[r["latency_s"]], r["heldout_per_task_after"])
            r["heldout_vs_sync"] = {"diff": est.value, "ci": [est.low, est.high], "tasks": est.n}


def _fastest_sync(results: list[dict], latency: float) -> dict | None:
    runs = [r for r in results if r["staleness"] == 0 and r["latency_s"] == latency]
    return min(runs, key=lambda r: r["seconds_per_iteration"]) if runs else None


def table(results: list[dict]) -> str:
    lines = ["| latency per env step | executor | max_staleness | s / iteration | ratio vs fastest K=0 | trainer waits (s) | "
             "rollouts wait (s) | staleness of trained steps | held-out success (before -> after ± s.e.) | "
             "after minus K=0's, paired [95% CI] |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    base = {lat: _fastest_sync(results, lat)["seconds_per_iteration"] for lat in {r["latency_s"] for r in results}
            if _fastest_sync(results, lat) is not None}
    for r in results:
        ratio = r["seconds_per_iteration"] / base[r["latency_s"]] if r["latency_s"] in base else float("nan")
        hist = ", ".join(f"{k}: {v}" for k, v in sorted(r["staleness_hist"].items())) or "0: all"
        d = r.get("heldout_vs_sync")
        vs = f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]" if d else "-"
        se = math.sqrt(r["heldout_after"] * (1 - r["heldout_after"]) / max(r["eval_episodes"], 1))
        lines.append(f"| {r['latency_s']:g} s | {r['executor']} | {r['staleness']} | {r['seconds_per_iteration']:.1f} | {ratio:.2f} | "
                     f"{r['trainer_wait_s']:.1f} | {r['rollout_wait_s']:.1f} | {hist} | "
                     f"{r['heldout_before']:.3f} -> {r['heldout_after']:.3f} ± {se:.3f} | {vs} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/bench_async_rollouts")
    p.add_argument("--warm-start", default=None, help="a model folder to start from (default: build one)")
    p.add_argument("--sft-tasks", type=int, default=300, help="expert episodes of the warm start built here")
    p.add_argument("--sft-epochs", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64, help="hidden size of the tiny model built here (preset: 256)")
    p.add_argument("--latencies", default="0.05", help="seconds per env step, comma-separated")
    p.add_argument("--staleness", default="0,1,2")
    p.add_argument("--executors", default="inprocess,threads", help="env executors, comma-separated")
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("overrides", nargs="*", help="extra config overrides (key=value)")
    args = p.parse_args()

    import agentgym  # noqa: F401
    import torch

    torch.set_num_threads(args.torch_threads)
    register_remote_household()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model_dir = Path(args.warm_start) if args.warm_start else warm_start(out, args.sft_tasks, args.sft_epochs, args.hidden)
    print(f"warm start: {model_dir} ({time.perf_counter() - t0:.0f}s)", flush=True)
    overrides = [f"torch_threads={args.torch_threads}", *args.overrides]
    results = []
    runs = [(float(lat), int(k), ex) for lat in args.latencies.split(",") for k in args.staleness.split(",")
            for ex in args.executors.split(",")]
    for latency, k, executor in runs:
        r = run_one(out, model_dir, k, latency, args.iterations, args.seed, overrides, executor)
        results.append(r)
        print(f"latency {latency:g}s {executor} K={k}: {r['seconds_per_iteration']:.1f} s/iteration, held-out "
              f"{r['heldout_before']:.3f} -> {r['heldout_after']:.3f}, staleness {r['staleness_hist']}", flush=True)
    paired_against_synchronous(results)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))
    print(table(results))
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
