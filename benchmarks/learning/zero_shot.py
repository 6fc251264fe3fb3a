"""Zero-shot table: the catalog's real model (SmolLM2-135M-Instruct) on the held-out split of every
env family, free and admissible-only decoding, beside random and oracle; success with Wilson intervals
and what the model does wrong (invalid actions, loops, unparsed replies), read from the trajectories.

Resumable, chunk by chunk: each (env, mode, step limit) cell plays its first --tasks held-out tasks
in chunks of --chunk, the cells of an env in turn, appending each chunk's trajectories to
<work>/<env>-steps<N>/<mode>.jsonl as it lands; the cell's results row is rewritten into --out after
every chunk (`complete` false until all its tasks are played). Rerunning the same command skips
what is there and continues.

The prompt is the one `agentgym eval` gives by default (the env's rules, the parser's format, the
admissible actions where the env lists them, the last two turns); greedy decoding, one episode per
task (deterministic); one torch thread (the machine is shared).

    python benchmarks/learning/zero_shot.py                                   # every cell, household first
    python benchmarks/learning/zero_shot.py --envs household --tasks 50       # one family
    python benchmarks/learning/zero_shot.py --time-budget 600                 # stop starting chunks after 10 min
    python benchmarks/learning/zero_shot.py --envs household --max-steps 12   # household-smol's step limit
    python benchmarks/learning/zero_shot.py --report                          # docs/real_llm.json as a table
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

# family -> (env id, whether the env lists admissible actions: admissible-only decoding applies)
ENVS = {
    "household": ("agentgym/Household-v0", True),
    "alfworld": ("agentgym/ALFWorld-v0", True),
    "webshop": ("agentgym/WebShop-v0", True),
    "searchqa": ("agentgym/SearchQA-v0", False),
    "tooluse": ("agentgym/ToolUse-v0", False),
    "briefing": ("agentgym/Briefing-v0", False),
    "textworld": ("agentgym/TextWorld-Simple-v0", True),
    "swe": ("agentgym/SWE-v0", False),
}
MODES = ("random", "oracle", "free", "admissible")
LLM_MODES = ("free", "admissible")
LOOP_REPEATS = 3  # an episode loops when it sends the same action in the same state this many times


def cell_modes(family: str, modes: list[str]) -> list[str]:
    return [m for m in modes if m != "admissible" or ENVS[family][1]]


def read_trajectories(path: Path) -> list:
    from agentgym.trajectory import Trajectory

    if not path.is_file():
        return []
    return [Trajectory.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def failure_analysis(trajectories: list) -> dict:
    """What went wrong, episode by episode and step by step."""
    steps = [s for t in trajectories for s in t.steps]
    unparsed = [s for s in steps if s.action is None]
    invalid = [s for s in steps if not s.action_valid]
    looping = 0
    for t in trajectories:
        seen = collections.Counter((s.anchor or s.observation, s.action) for s in t.steps if s.action is not None)
        looping += any(n >= LOOP_REPEATS for n in seen.values())
    failed = [t for t in trajectories if not t.success]
    invalid_texts = collections.Counter(" ".join((s.text or "").split())[:80] for s in invalid)
    return {
        "steps": len(steps),
        "invalid_steps": len(invalid),
        "unparsed_replies": len(unparsed),  # no action in the env's format at all
        "episodes_looping": looping,  # same action in the same state >= LOOP_REPEATS times
        "failed_episodes": len(failed),
        "failed_at_step_limit": sum(bool(t.truncated) for t in failed),
        "mean_reply_tokens": round(sum(len(s.response_ids or []) for s in steps) / max(1, len(steps)), 1),
        "common_invalid_replies": invalid_texts.most_common(5),
        "common_actions": collections.Counter(s.action for s in steps if s.action is not None).most_common(5),
    }


def cell_row(family: str, mode: str, trajectories: list, wanted: int, seconds: float, max_steps: int) -> dict:
    from agentgym.evaluation.evaluate import compute_metrics

    env_id = ENVS[family][0]
    result = compute_metrics(trajectories, env_id=env_id, split="heldout", policy=mode)
    overall = result.overall
    row = {"family": family, "env": env_id, "mode": mode, "max_steps": max_steps, "tasks": len(trajectories),
           "tasks_wanted": wanted,
           "complete": len(trajectories) >= wanted, "success": overall.success_rate.to_dict(),
           "invalid_action_rate": overall.invalid_action_rate.to_dict(), "mean_steps": overall.mean_steps.value,
           "infra_errors": result.infra_errors, "seconds": round(seconds, 1),
           "seconds_per_episode": round(seconds / max(1, len(trajectories)), 1)}
    if mode in LLM_MODES:
        row["failures"] = failure_analysis(trajectories)
    return row


def cell_cost(path: Path, out: Path) -> dict:
    """A cell's wall seconds so far and wanted tasks: beside its trajectories, else from its row in `out`."""
    if path.with_suffix(".cost.json").is_file():
        return json.loads(path.with_suffix(".cost.json").read_text())
    family, steps = path.parent.name.rsplit("-steps", 1)
    rows = json.loads(out.read_text())["rows"] if out.is_file() else []
    return next(({"seconds": r["seconds"], "tasks_wanted": r["tasks_wanted"]} for r in rows
                 if (r["family"], r["mode"], r["max_steps"]) == (family, path.stem, int(steps))),
                {"seconds": 0.0, "tasks_wanted": 0})


def write_results(out: Path, work: Path, settings: dict) -> None:
    """Every cell's row, recomputed from the trajectories in `work` (so runs that share it, one env
    family each, never drop each other's rows), and the rows already in `out` of cells `work` has not
    played; a cell's wall seconds and wanted task count are kept beside its trajectories
    (<mode>.cost.json)."""
    rows = []
    for path in sorted(work.glob("*-steps*/*.jsonl")):
        family, steps = path.parent.name.rsplit("-steps", 1)
        if family not in ENVS or path.stem not in MODES:
            continue
        cost = cell_cost(path, out)
        rows.append(cell_row(family, path.stem, read_trajectories(path), cost["tasks_wanted"], cost["seconds"],
                             int(steps)))
    # cells played elsewhere (another machine, another --work) keep the rows they wrote
    played = {(r["family"], r["mode"], r["max_steps"]) for r in rows}
    earlier = json.loads(out.read_text()).get("rows", []) if out.is_file() else []
    rows += [r for r in earlier if (r["family"], r["mode"], r["max_steps"]) not in played]
    order = {f: i for i, f in enumerate(ENVS)}
    rows.sort(key=lambda r: (order[r["family"]], r["max_steps"], MODES.index(r["mode"])))
    # the other keys (benchmarks/learning/real_llm_rl.py's "rl_table") are kept
    whole = {**(json.loads(out.read_text()) if out.is_file() else {}), "settings": settings, "rows": rows}
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(whole, indent=1) + "\n")
    os.replace(tmp, out)


def make_policy(mode: str, env_id: str, model: str, max_prompt_tokens: int, device: str = "cpu"):
    if mode == "random":
        from agentgym.policies import RandomPolicy

        return RandomPolicy(seed=0)
    if mode == "oracle":
        from agentgym.policies import OraclePolicy
        from agentgym.registration import get_task_space

        return OraclePolicy(get_task_space(env_id))
    from agentgym.policies.hf import HFPolicy

    return HFPolicy(model, device=device, max_prompt_tokens=max_prompt_tokens)


def markdown_table(rows: list[dict]) -> str:
    """The results as docs/real_llm.md shows them (`--report`)."""
    lines = ["| env | steps | mode | tasks | success [95% Wilson] | invalid actions | unparsed | looping episodes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, f = r["success"], r.get("failures")
        tasks = f"{r['tasks']}" + ("" if r["complete"] else f" of {r['tasks_wanted']}")
        extra = (f"{f['invalid_steps'] / max(1, f['steps']):.2f} | {f['unparsed_replies']}/{f['steps']} steps | "
                 f"{f['episodes_looping']}/{r['tasks']}") if f else f"{r['invalid_action_rate']['value']:.2f} | - | -"
        lines.append(f"| {r['family']} | {r['max_steps']} | {r['mode']} | {tasks} | "
                     f"{s['value']:.2f} [{s['low']:.2f}, {s['high']:.2f}] | {extra} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="catalog name, GGUF file or HF folder")
    parser.add_argument("--envs", default=",".join(ENVS), help="families, comma-separated, in the order to run")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--tasks", type=int, default=50, help="held-out tasks per cell (the split's first N)")
    parser.add_argument("--chunk", type=int, default=5, help="tasks per saved chunk (and per batched rollout)")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="a reply's token cap (an action in its tags is ~10-20 tokens)")
    parser.add_argument("--max-prompt-tokens", type=int, default=2048)
    parser.add_argument("--device", default="cpu", help="where the model runs (cpu, cuda)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="episode step limit (default: each env's own); cells of another limit are kept apart")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds; no chunk starts after it")
    parser.add_argument("--out", default="docs/real_llm.json")
    parser.add_argument("--report", action="store_true", help="print --out's rows as a markdown table and exit")
    parser.add_argument("--work", default="runs/zero_shot", help="trajectories, one JSONL per cell")
    args = parser.parse_args()

    if args.report:
        print(markdown_table(json.loads(Path(args.out).read_text())["rows"]))
        return
    modes = args.modes.split(",")
    unknown = sorted(set(modes) - set(MODES)) + sorted(set(args.envs.split(",")) - set(ENVS))
    if unknown:
        parser.error(f"unknown {', '.join(unknown)}: modes are {', '.join(MODES)}; envs {', '.join(ENVS)}")
    import gymnasium as gym
    import torch

    torch.set_num_threads(1)
    from agentgym.evaluation.evaluate import EvalRequest, run_eval
    from agentgym.policies.base import SamplingParams
    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import save_split
    from agentgym.trajectory import save_trajectories

    out, work = Path(args.out), Path(args.work)
    settings = {"model": args.model, "split": "heldout (the first N tasks)", "decoding": "greedy, 1 episode per task",
                "max_new_tokens": args.max_new_tokens, "max_prompt_tokens": args.max_prompt_tokens,
                "prompt": "agentgym's default chat layout (env rules, action format, admissible list, last 2 turns)",
                "torch_threads": 1, "command": command(__file__, sys.argv[1:])}
    start, llm = time.perf_counter(), None
    for family in args.envs.split(","):
        env_id = ENVS[family][0]
        tasks = get_task_space(env_id).split("heldout")[:args.tasks]
        env_kwargs = {"max_episode_steps": args.max_steps} if args.max_steps else None
        steps = args.max_steps or gym.spec(env_id).max_episode_steps
        cells = {mode: work / f"{family}-steps{steps}" / f"{mode}.jsonl" for mode in cell_modes(family, modes)}
        # round robin, a chunk of each unfinished cell in turn: a stopped run has some of every cell
        while True:
            todo = [(mode, path) for mode, path in cells.items() if len(read_trajectories(path)) < len(tasks)]
            if not todo:
                break
            for mode, path in todo:
                if args.time_budget is not None and time.perf_counter() - start > args.time_budget:
                    print("time budget spent; the same command continues where this stopped")
                    return
                if mode in LLM_MODES and llm is None:
                    llm = make_policy(mode, env_id, args.model, args.max_prompt_tokens, args.device)
                player = llm if mode in LLM_MODES else make_policy(mode, env_id, args.model, 0)
                path.parent.mkdir(parents=True, exist_ok=True)
                done = read_trajectories(path)
                first = len(done)
                seconds = cell_cost(path, out)["seconds"]
                with tempfile.TemporaryDirectory() as tmp:
                    manifest = Path(tmp) / "chunk.jsonl"
                    save_split(manifest, tasks[first:first + args.chunk])
                    sampling = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens, seed=0,
                                              admissible_only=mode == "admissible")
                    t0 = time.perf_counter()
                    result = run_eval(EvalRequest(env_id, manifest, 1, sampling=sampling, seed=first,
                                                  env_kwargs=env_kwargs, max_batch_episodes=args.chunk),
                                      player, session=None)
                    seconds += time.perf_counter() - t0
                save_trajectories(path, result.trajectories, append=True)
                done = read_trajectories(path)
                path.with_suffix(".cost.json").write_text(json.dumps({"seconds": round(seconds, 1),
                                                                      "tasks_wanted": len(tasks)}) + "\n")
                write_results(out, work, settings)
                wins = sum(bool(t.success) for t in done)
                print(f"{family}/{mode} ({steps} steps): {len(done)}/{len(tasks)} tasks, {wins} solved, "
                      f"{seconds / len(done):.1f}s/episode", flush=True)
    write_results(out, work, settings)


if __name__ == "__main__":
    main()
