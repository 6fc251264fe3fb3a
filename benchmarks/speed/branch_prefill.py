"""Prefilled tokens and time of a tree rollout, with and without branches forking their parent's KV cache.

A branch's first prompt is its parent's prompt at the branch step. Without forks the engine has
nothing cached for it and prefills it whole (once for the k branches of a point: identical prompts of
a call are prefilled once); with forks (`HFPolicy.fork`, what collect does) the branch starts from
the parent's cache and prefills one token. Both arms sample with the same seed and the cache changes
no computation but its order (tests/snapshots/test_branch_kv.py), so they play the same episodes
(`same_replies` says whether they did) and every difference is the prefill. The arm without forks
is the engine with `policy.fork = None`, which rollouts then skip, as they skip an engine without it.

A collect of household-tiny's tasks (its env, step limit and tiny model, built by the command), one
thread; per chat layout (`preset`: the preset's windowed prompts; `full`: growing conversations,
token in, token out) the arms alternate --repeats times and the median of each is kept:

    python benchmarks/speed/branch_prefill.py
    python benchmarks/speed/branch_prefill.py --model smollm2-135m-instruct --chats full --tasks 1 \\
        --group 1 --steps 4 --repeats 1 --out docs/branch_prefill_smollm2.json

Writes --out (default docs/branch_prefill.json): per layout and arm the tokens prefilled at branches'
first turns and at all turns, against the prompts' tokens, and the rollout's wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
import agentgym  # noqa: E402
from agentgym.chat import ChatConfig  # noqa: E402
from agentgym.policies.base import SamplingParams  # noqa: E402
from benchmarks.harness.provenance import code_version, command, load_average  # noqa: E402

FULL_CHAT = {"parser": "raw", "history": "full", "system_prompt": ""}
ARMS = {"without_fork": False, "with_fork": True}
COUNTS = ("episodes", "branches", "turns", "branch_first_turn_prompt_tokens", "branch_first_turn_prefill_tokens",
          "prompt_tokens", "prefill_tokens", "caches_left")


def count_prefill(policy, rows: list[tuple[str, int, int]]) -> None:
    """Append (cache key, prompt length, tokens prefilled) for every prompt the engine computes."""
    if policy.pool_engine is not None:
        engine, real = policy.pool_engine, policy.pool_engine._generate_part

        def part(rows_in, prompt_ids, keys, sampling, tries):
            out = real(rows_in, prompt_ids, keys, sampling, tries)
            rows.extend((keys[i], len(prompt_ids[i]), n) for i, n in zip(rows_in, policy.last_prefill_tokens))
            return out

        engine._generate_part = part
        return
    real = policy._sample

    def sample(prompt_ids, sampling, cache_keys=None, **options):
        out = real(prompt_ids, sampling, cache_keys, **options)
        rows.extend((k, len(p), n) for k, p, n in zip(cache_keys, prompt_ids, policy.last_prefill_tokens))
        return out

    policy._sample = sample


def play(model: str, fork: bool, chat: ChatConfig, env_kwargs: dict, args) -> dict:
    """One branched collect; its prefill counts and seconds."""
    from agentgym.policies.hf import HFPolicy

    policy = HFPolicy(model)
    if args.engine == "pool":
        policy.use_pool_engine(log=lambda line: print(line, flush=True))
    if not fork:
        policy.fork = None  # rollouts skip an engine without fork
    rows: list[tuple[str, int, int]] = []
    count_prefill(policy, rows)
    tasks = agentgym.get_task_space(args.env).split("train")[: args.tasks]
    wall, cpu = time.perf_counter(), time.process_time()
    trajs = agentgym.collect(args.env, tasks, policy, args.group, seed=0, chat=chat, env_kwargs=env_kwargs,
                             session=None, branch={"k": args.k, "every": args.every},
                             sampling=SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                                                     seed=0))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    roots = len(tasks) * args.group
    seen: set[str] = set()
    first_turns = []  # (prompt length, prefilled) of each branch's first turn
    for key, length, prefilled in rows:
        if int(key.rsplit(":", 1)[1]) >= roots and key not in seen:  # episodes past the roots are branches
            first_turns.append((length, prefilled))
        seen.add(key)
    left = len(policy._prefixes) + (len(policy.pool_engine.pool.owner) if policy.pool_engine is not None else 0)
    return {"episodes": len(trajs), "branches": len(trajs) - roots, "turns": len(rows),
            "branch_first_turn_prompt_tokens": sum(length for length, _ in first_turns),
            "branch_first_turn_prefill_tokens": sum(n for _, n in first_turns),
            "prompt_tokens": sum(length for _, length, _ in rows), "prefill_tokens": sum(n for _, _, n in rows),
            "caches_left": left, "wall_s": wall, "cpu_s": cpu,
            "replies": [[s.response_ids for s in t.steps] for t in trajs]}


def measure(model: str, chat: ChatConfig, env_kwargs: dict, args) -> dict:
    """Both arms, alternating, `repeats` times each: the counts of the first run, the median seconds."""
    runs: dict[str, list[dict]] = {name: [] for name in ARMS}
    for _ in range(args.repeats):
        for name, fork in ARMS.items():
            runs[name].append(play(model, fork, chat, env_kwargs, args))
    arms = {}
    for name, done in runs.items():
        arm = {k: done[0][k] for k in COUNTS}
        arm["same_counts_every_run"] = all({k: r[k] for k in COUNTS} == arm for r in done)
        arm["wall_s"] = round(statistics.median(r["wall_s"] for r in done), 2)
        arm["cpu_s"] = round(statistics.median(r["cpu_s"] for r in done), 2)
        arms[name] = arm
    a, b = arms["without_fork"], arms["with_fork"]
    return {"chat": dataclasses.asdict(chat), "arms": arms,
            "same_replies": all(r["replies"] == runs["without_fork"][0]["replies"] for done in runs.values()
                                for r in done),
            "branch_first_turn_prefill_saved":
                a["branch_first_turn_prefill_tokens"] - b["branch_first_turn_prefill_tokens"],
            "prefill_saved_fraction": round(1 - b["prefill_tokens"] / a["prefill_tokens"], 4),
            "cpu_saved_fraction": round(1 - b["cpu_s"] / a["cpu_s"], 4),
            "wall_saved_fraction": round(1 - b["wall_s"] / a["wall_s"], 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="", help="a model folder or catalog name (default: household-tiny's tiny model)")
    ap.add_argument("--engine", choices=("hf", "pool"), default="hf")
    ap.add_argument("--chats", nargs="+", choices=("preset", "full"), default=["preset", "full"])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--group", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="max_episode_steps (0: the preset's)")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="docs/branch_prefill.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from agentgym.trainers.config import load_config

    cfg = load_config("household-tiny", [])
    args.env = cfg.env.id
    env_kwargs = {**cfg.env.env_kwargs, **({"max_episode_steps": args.steps} if args.steps else {})}
    model = args.model
    if not model:
        from agentgym.policies.tiny import build_tiny_model
        from agentgym.trainers.run_setup import collect_env_texts

        texts = collect_env_texts(cfg.env.id, num_tasks=cfg.tiny.num_tasks, seed=0, chat=cfg.env.chat, session=None)
        model = str(build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", env_id=cfg.env.id, texts=texts,
                                     vocab_size=cfg.tiny.vocab_size, hidden=cfg.tiny.hidden, layers=cfg.tiny.layers,
                                     heads=cfg.tiny.heads))
    layouts = {"preset": cfg.env.chat, "full": ChatConfig.of(FULL_CHAT)}
    results = {}
    for name in args.chats:
        results[name] = r = measure(model, layouts[name], env_kwargs, args)
        a, b = r["arms"]["without_fork"], r["arms"]["with_fork"]
        print(f"{name}: {b['branches']} branches; their first turns prefilled {a['branch_first_turn_prefill_tokens']} "
              f"-> {b['branch_first_turn_prefill_tokens']} tokens (of {a['branch_first_turn_prompt_tokens']}); all "
              f"turns {a['prefill_tokens']} -> {b['prefill_tokens']} ({r['prefill_saved_fraction']:.1%} saved); CPU "
              f"{a['cpu_s']}s -> {b['cpu_s']}s, wall {a['wall_s']}s -> {b['wall_s']}s; same replies "
              f"{r['same_replies']}", flush=True)
    report = {"command": command(__file__, sys.argv[1:]), "code_version": code_version(),
              "load_average": load_average(),
              "model": args.model or "household-tiny's tiny model (built by the command)", "engine": args.engine,
              "env": args.env, "env_kwargs": env_kwargs, "tasks": args.tasks, "group": args.group,
              "branch": {"k": args.k, "every": args.every}, "max_new_tokens": args.max_new_tokens,
              "temperature": args.temperature, "repeats": args.repeats, "chats": results}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
