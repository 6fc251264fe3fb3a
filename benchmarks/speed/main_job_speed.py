"""CPU seconds per RL iteration of the main job, this checkout against an earlier commit, in one run.

Both versions train the same warm start (`--warm-start`, default: the SFT model the main job
leaves in runs/household-tiny/sft_model; built here with a smaller SFT when missing) with the
household-tiny preset for `--iterations` RL iterations on one thread, the held-out evaluation cut
to one episode (it is not what is timed). Each iteration's CPU time is this process's
`time.process_time()` between iterations; the first iteration is left out. The two versions run
alternately, `--rounds` times each, so the machine's load falls on both alike. The earlier
commit runs from a git worktree (the package laid out as installed: agentgym/{envs,policies,
trainers,tasks} linked in), so nothing of this checkout leaks into it.

Adds to docs/trl_vs_agentgym.json: main_job_cpu_s_per_iter_ratio = after / before, and the
per-version figures (CPU s per iteration, rollout and update seconds, trained tokens).

Usage: python benchmarks/speed/main_job_speed.py [--before 5b357da] [--iterations 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("envs", "policies", "trainers", "tasks")  # installed as agentgym.<folder> (pyproject)

DRIVER = r"""
import json, sys, time
from agentgym.trainers.config import load_config
from agentgym.trainers.training import train
run_dir, model, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = load_config("household-tiny", [f"run_dir={run_dir}", f"policy.model={model}", "tiny.build=false",
                  "sft.enabled=false", f"iterations={iterations}", "eval.num_tasks=1", "eval.episodes_per_task=1",
                  "torch_threads=1", "checkpoint_every=0", "log.plot=false"])
rows, last = [], [time.process_time()]
def on_iteration(m):
    now = time.process_time()
    rows.append({"cpu_s": now - last[0], "rollout_s": m["time"]["rollout_s"], "update_s": m["time"]["update_s"],
                 "trained_tokens": m["train"]["tokens"], "samples": m["train"]["samples"],
                 "success": m["rollout"]["success_rate"], "mean_steps": m["rollout"]["mean_steps"]})
    last[0] = now
train(cfg, log=lambda *_: None, on_iteration=on_iteration)
print("RESULT " + json.dumps(rows))
"""


def package_tree(commit: str, work: Path) -> Path:
    """A directory to put on PYTHONPATH that imports `agentgym` as installed at `commit`."""
    checkout = work / f"src_{commit}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(checkout), commit],
                   check=True, capture_output=True)
    tree = work / f"pkg_{commit}"
    (tree / "agentgym").mkdir(parents=True)
    for item in (checkout / "agentgym").iterdir():
        (tree / "agentgym" / item.name).symlink_to(item)
    for folder in FOLDERS:
        (tree / "agentgym" / folder).symlink_to(checkout / folder)
    return tree


def run(pythonpath: Path | None, run_dir: Path, model: Path, iterations: int) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run([sys.executable, "-c", DRIVER, str(run_dir), str(model), str(iterations)], env=env,
                         capture_output=True, text=True, cwd=tempfile.gettempdir())
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        raise SystemExit(f"run failed ({pythonpath or 'this checkout'}):\n{out.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def warm_start(path: Path | None, work: Path) -> Path:
    if path is not None and (path / "config.json").is_file():
        return path
    default = ROOT / "runs" / "household-tiny" / "sft_model"
    if path is None and (default / "config.json").is_file():
        return default
    print("no warm start given or found: building one (tiny model + SFT on 300 tasks)")
    run_dir = work / "warm"
    subprocess.run([sys.executable, "-m", "agentgym.cli", "train", "household-tiny", f"run_dir={run_dir}",
                    "iterations=0", "sft.num_tasks=300", "eval.num_tasks=1"], check=True, cwd=ROOT)
    return run_dir / "sft_model"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="5b357da", help="the commit to compare with")
    ap.add_argument("--warm-start", type=Path, default=None)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs" / "trl_vs_agentgym.json"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="main_job_speed_"))
    model = warm_start(args.warm_start, work).resolve()  # the runs start in a temporary folder
    before_tree = package_tree(args.before, work)
    results: dict[str, list[dict]] = {"before": [], "after": []}
    for r in range(args.rounds):
        for name, tree in (("before", before_tree), ("after", None)):
            rows = run(tree, work / f"{name}_{r}", model, args.iterations)
            results[name] += rows[1:]  # the first iteration warms up caches and allocators
            print(f"round {r + 1} {name}: CPU s/iter {statistics.mean(x['cpu_s'] for x in rows[1:]):.2f}", flush=True)
    summary = {}
    for name, rows in results.items():
        summary[name] = {k: statistics.mean(x[k] for x in rows) for k in rows[0]}
        summary[name]["iterations_measured"] = len(rows)
    ratio = summary["after"]["cpu_s"] / summary["before"]["cpu_s"]
    print(json.dumps(summary, indent=2))
    print(f"main job CPU s per RL iteration, after / before ({args.before}): {ratio:.3f}")
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.is_file() else {}
    report["main_job_cpu_s_per_iter_ratio"] = ratio
    report["main_job_speed"] = {"command": "python " + " ".join(sys.argv), "before_commit": args.before,
                                "warm_start": str(model), **summary}
    out.write_text(json.dumps(report, indent=2))
    print(f"written: {out}")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / f"src_{args.before}")],
                   capture_output=True)


if __name__ == "__main__":
    main()
