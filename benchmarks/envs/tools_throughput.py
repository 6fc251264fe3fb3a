"""ToolUse-v0 throughput and reset latency.

Prints, measured in this run on one core (CPU time of the process by default, see --wall):
  * reset latency: a fresh task (world generated from its seed, cache cleared) and a task seen
    before (the cached initial state is copied), median and p95;
  * env steps/s for three action mixes: the oracle's plans (valid tool calls, mostly reads and
    single-record writes), invalid actions (malformed JSON / unknown tools / schema errors) and
    lists of 5 calls;
  * the reference measured in the same run: the bare tool handlers on the same calls (no
    parsing, schema checks, grading or state hashing), and the env / bare ratio, i.e. what the
    env's per-step bookkeeping costs;
  * steps/s through ChatEnv with the json parser (what a rollout sees).

Usage: python benchmarks/envs/tools_throughput.py [--quick] [--wall]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import agentgym
from agentgym.envs.tools import tasks as tool_tasks
from agentgym.envs.tools.env import TOOLS, ToolUseEnv
from agentgym.envs.tools.toolkit import ToolError

# CPU time of this process: the machine this runs on is often shared, and wall-clock timings
# there measure the neighbours more than the env. --wall switches back to wall-clock time.
clock = time.process_time


def reset_latency(env: ToolUseEnv, specs, cold: bool) -> list[float]:
    times = []
    for spec in specs:
        if cold:
            tool_tasks._build.cache_clear()
        t0 = clock()
        env.reset(options={"task": spec})
        times.append(clock() - t0)
    return times


def oracle_episodes(space, specs):
    return [(spec, space.solve(spec)) for spec in specs]


def env_steps_per_s(env: ToolUseEnv, episodes, wrap=lambda a: a) -> tuple[float, int]:
    n, elapsed = 0, 0.0
    for spec, plan in episodes:
        env.reset(options={"task": spec})
        for action in plan:
            text = wrap(action)
            t0 = clock()
            env.step(text)
            elapsed += clock() - t0
            n += 1
    return n / elapsed, n


def bare_calls_per_s(env: ToolUseEnv, episodes) -> float:
    """The same calls straight to the handlers on the same states: the reference."""
    n, elapsed = 0, 0.0
    for spec, plan in episodes:
        env.reset(options={"task": spec})
        state = env.state
        for action in plan:
            call = json.loads(action)
            handler = TOOLS[call["name"]].handler
            t0 = clock()
            try:
                handler(state, call["arguments"])
            except ToolError:
                pass
            elapsed += clock() - t0
            n += 1
    return n / elapsed


INVALID = ['{"name": "send_payment", "arguments": {"to": "a@b.co", "amount": "ten"}}', "look around",
           '{"name": "teleport", "arguments": {}}', '{"name": "list_events", "arguments": {"start_date": "soon"}}',
           '[{"name": "get_balance"}, {"name": 3}]', '{"name": "read_file", "arguments": {"path": "/nope.txt"}}']


def invalid_steps_per_s(env: ToolUseEnv, specs, per_task: int) -> float:
    n, elapsed = 0, 0.0
    for spec in specs:
        env.reset(options={"task": spec})
        for i in range(per_task):
            action = INVALID[i % len(INVALID)]
            t0 = clock()
            env.step(action)
            elapsed += clock() - t0
            n += 1
    return n / elapsed


def batched_steps_per_s(env: ToolUseEnv, specs, per_task: int) -> float:
    batch = json.dumps([{"name": "search_contacts", "arguments": {"query": "a"}},
                        {"name": "list_events", "arguments": {"start_date": "2026-01-01"}},
                        {"name": "list_emails", "arguments": {}},
                        {"name": "add_shopping_item", "arguments": {"name": "kiwis"}},
                        {"name": "get_balance", "arguments": {}}])
    n, elapsed = 0, 0.0
    for spec in specs:
        env.reset(options={"task": spec})
        for _ in range(per_task):
            t0 = clock()
            env.step(batch)
            elapsed += clock() - t0
            n += 1
    return n / elapsed


def chat_steps_per_s(episodes) -> float:
    chat = agentgym.ChatEnv(agentgym.make("ToolUse-v0"), parser="json", history=2)
    n, elapsed = 0, 0.0
    for spec, plan in episodes:
        chat.reset(options={"task": spec})
        for action in plan:
            text = chat.format_action(action)
            t0 = clock()
            chat.step(text)
            elapsed += clock() - t0
            n += 1
    return n / elapsed


def ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1e3:.2f} ms, p95 {np.percentile(xs, 95) * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks (a few seconds)")
    parser.add_argument("--wall", action="store_true", help="time with the wall clock instead of CPU time")
    args = parser.parse_args()
    global clock
    if args.wall:
        clock = time.perf_counter
    n_tasks = 60 if args.quick else 250  # the task cache holds 256

    space = tool_tasks.ToolUseTaskSpace()
    rng = np.random.default_rng(0)
    names = sorted(tool_tasks.TEMPLATES)
    specs = [space.sample(rng, template=names[i % len(names)]) for i in range(n_tasks)]
    env = ToolUseEnv()

    cold = reset_latency(env, specs, cold=True)
    reset_latency(env, specs, cold=False)  # fills the cache (holds 256 tasks)
    warm = reset_latency(env, specs, cold=False)
    episodes = oracle_episodes(space, specs)
    env_rate, steps = env_steps_per_s(env, episodes)
    bare_rate = bare_calls_per_s(env, episodes)
    invalid_rate = invalid_steps_per_s(env, specs, per_task=10)
    batch_rate = batched_steps_per_s(env, specs, per_task=10)
    chat_rate = chat_steps_per_s(episodes[: max(20, n_tasks // 4)])

    timer = "wall-clock" if args.wall else "CPU"
    print(f"ToolUse-v0 ({n_tasks} tasks over {len(names)} templates, {steps} oracle steps, one core, {timer} time)")
    print(f"reset, fresh task (world generated):  {ms(cold)}")
    print(f"reset, task seen before (cached):     {ms(warm)}")
    print(f"env steps/s, oracle plans:            {env_rate:,.0f}")
    print(f"  reference, bare tool handlers:      {bare_rate:,.0f} calls/s  (env/bare = {env_rate / bare_rate:.3f})")
    print(f"env steps/s, invalid actions:         {invalid_rate:,.0f}")
    print(f"env steps/s, lists of 5 calls:        {batch_rate:,.0f}  ({5 * batch_rate:,.0f} calls/s)")
    print(f"ChatEnv(json parser) steps/s, oracle: {chat_rate:,.0f}")


if __name__ == "__main__":
    main()
