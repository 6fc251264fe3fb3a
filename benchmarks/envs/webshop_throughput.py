"""WebShop throughput: text backend vs browser backend, one env and four at once.

Prints, for each backend: steps (actions) per second per env, reset latency, and the same
figures with 4 envs running at once in 4 processes; then the text/browser ratio measured in
this run. The text figure for "one core" pins the process to a single CPU.

    python benchmarks/envs/webshop_throughput.py            # full run (a few minutes)
    python benchmarks/envs/webshop_throughput.py --quick    # about 30 seconds
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor


def workload(n_tasks: int, seed: int) -> list[tuple[object, list[str]]]:
    """(task, actions) pairs: a random walk over admissible actions, then the oracle's plan,
    replayed identically on either backend."""
    import numpy as np

    from agentgym.envs.webshop.env import WebShopEnv

    env = WebShopEnv()
    space = env.task_space
    rng = np.random.default_rng(seed)
    tasks = space.split("train")
    out = []
    for i in range(n_tasks):
        task = tasks[int(rng.integers(len(tasks)))]
        actions = []
        _, info = env.reset(options={"task": task})
        for _ in range(6):
            options = info["admissible_actions"]
            action = options[int(rng.integers(len(options)))]
            if action.startswith("search"):
                action = f"search[{task.params['product_type']}]"
            if action == "click[Buy Now]":
                break
            actions.append(action)
            info = env.step(action)[4]
        out.append((task, ["click[Back to Search]"] * (info["page"] != "search") + space.solve(task)))
    env.close()
    return out


def tree_cpu_seconds() -> float:
    """CPU time used so far by this process and its children (driver, Chromium): a figure that
    does not depend on how busy the machine is, unlike wall-clock throughput."""
    try:
        import psutil
    except ImportError:
        return float("nan")
    total = 0.0
    for proc in [psutil.Process()] + psutil.Process().children(recursive=True):
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def run(backend: str, n_tasks: int, seed: int, pin: bool = False) -> dict:
    """Play the workload; returns steps, step time and reset latencies (seconds)."""
    if pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from agentgym.envs.webshop.env import WebShopEnv

    episodes = workload(n_tasks, seed)
    env = WebShopEnv(backend=backend)
    start = time.perf_counter()
    env.reset(options={"task": episodes[0][0]})  # cold start: server and browser launch (browser)
    cold = time.perf_counter() - start
    steps, step_time, resets, successes = 0, 0.0, [], 0
    cpu0 = tree_cpu_seconds()
    for task, actions in episodes:
        t0 = time.perf_counter()
        env.reset(options={"task": task})
        resets.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for action in actions:
            _, _, terminated, _, info = env.step(action)
            steps += 1
            if terminated:
                break
        step_time += time.perf_counter() - t0
        successes += bool(info["success"])
    cpu = tree_cpu_seconds() - cpu0
    env.close()
    return {"steps": steps, "step_time": step_time, "resets": resets, "cold": cold, "cpu": cpu,
            "success": successes / len(episodes), "wall": time.perf_counter() - start}


def summarize(name: str, results: list[dict]) -> dict:
    per_env = [r["steps"] / r["step_time"] for r in results]
    resets = [x for r in results for x in r["resets"]]
    total_steps = sum(r["steps"] for r in results)
    wall = max(r["step_time"] + sum(r["resets"]) for r in results)
    row = {
        "name": name, "envs": len(results), "steps_per_s_per_env": statistics.mean(per_env),
        "steps_per_s_total": total_steps / wall, "reset_ms_median": 1000 * statistics.median(resets),
        "reset_ms_p95": 1000 * sorted(resets)[int(0.95 * (len(resets) - 1))],
        "cold_start_s": statistics.mean(r["cold"] for r in results),
        "oracle_success": statistics.mean(r["success"] for r in results),
        "cpu_ms_per_action": 1000 * sum(r["cpu"] for r in results) / (total_steps + sum(len(r["resets"]) for r in results)),
    }
    print(f"{name:<28} envs={row['envs']}  actions/s per env={row['steps_per_s_per_env']:8.1f}  "
          f"total actions/s={row['steps_per_s_total']:8.1f}  reset median={row['reset_ms_median']:7.2f} ms  "
          f"p95={row['reset_ms_p95']:7.2f} ms  cold start={row['cold_start_s']:5.2f} s  "
          f"CPU per action (all processes)={row['cpu_ms_per_action']:.2f} ms  "
          f"oracle success={row['oracle_success']:.2f}", flush=True)
    return row


def in_processes(backend: str, n_envs: int, n_tasks: int, pin: bool = False) -> list[dict]:
    # spawn: each worker starts its own Playwright driver and browser from a clean process.
    with ProcessPoolExecutor(n_envs, mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(run, backend, n_tasks, 100 + i, pin) for i in range(n_envs)]
        return [f.result() for f in futures]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer episodes (about 30 s)")
    parser.add_argument("--envs", type=int, default=4, help="envs at once in the parallel runs")
    parser.add_argument("--no-browser", action="store_true", help="text backend only")
    args = parser.parse_args()
    text_tasks, browser_tasks = (200, 8) if args.quick else (2000, 20)

    print(f"cpus available: {len(os.sched_getaffinity(0))}, load average: {os.getloadavg()[0]:.1f}")
    text_1 = summarize("text, 1 env, 1 core", in_processes("text", 1, text_tasks, pin=True))
    text_n = summarize(f"text, {args.envs} envs", in_processes("text", args.envs, text_tasks))
    if args.no_browser or not os.path.exists("/usr/bin/chromium"):
        print("browser backend skipped (no /usr/bin/chromium or --no-browser)")
        return
    browser_1 = summarize("browser, 1 env", in_processes("browser", 1, browser_tasks))
    browser_n = summarize(f"browser, {args.envs} envs", in_processes("browser", args.envs, browser_tasks))
    print(f"browser actions/s per page vs target 10: {browser_1['steps_per_s_per_env'] / 10:.2f}x")
    print(f"text / browser ratio, 1 env: {text_1['steps_per_s_per_env'] / browser_1['steps_per_s_per_env']:.0f}x; "
          f"{args.envs} envs (total): {text_n['steps_per_s_total'] / browser_n['steps_per_s_total']:.0f}x")


if __name__ == "__main__":
    main()
