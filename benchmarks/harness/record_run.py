"""Write one experiment's results file from a finished training run: the figures the docs quote,
the exact command that produced them, the code version and the machine's load while it ran.

    python benchmarks/harness/record_run.py RUN_DIR --command "agentgym train household-tiny torch_threads=1" \
        --code-version b4da05d --load-file load.txt --time-file time.txt -o docs/results/main_job.json

It prints the figures block the docs quote (`headline`): a template whose every figure is a key of
the results file, and its render (scripts/render_figures.py; tests/core/test_quoted_figures.py fails
when the text shown is not the render). Figures are fractions (success, invalid-action rate) and
seconds; the file also keeps each held-out task's success before and after, so the paired interval
can be recomputed from it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import ROOT, code_version, mean_load, time_report_cpu_seconds  # noqa: E402


def eval_records(run_dir: Path) -> list[dict]:
    """The held-out evaluations logged in metrics.jsonl, first to last."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if "eval/success_rate" in r]


def record(run_dir: Path, command: str, code_version: str, machine: str, load_file: Path | None,
           time_file: Path | None) -> dict:
    """The results of a finished run; of a run still going (no summary.json yet), what it has
    measured so far: the evaluation before RL, and `in_progress` saying how far RL got."""
    config = (run_dir / "config.yaml").read_text()
    threads = re.search(r"^torch_threads: (\S+)", config, flags=re.M)
    evals = eval_records(run_dir)
    first, last = evals[0], evals[-1]
    result = {
        "command": command,
        "code_version": code_version,
        "machine": machine,
        "torch_threads": int(threads.group(1)) if threads and threads.group(1).isdigit() else None,
        "mean_load_1min": mean_load(load_file) if load_file else None,
        "cpu_seconds": time_report_cpu_seconds(time_file) if time_file and time_file.is_file() else None,
        "seed": int(re.search(r"^seed: (\d+)", config, flags=re.M).group(1)),
        "heldout_tasks": sum(k.startswith("eval/per_task_success/") for k in first),
        "episodes_per_task": int(re.search(r"^  episodes_per_task: (\d+)", config, flags=re.M).group(1)),
        "before": round(first["eval/success_rate"], 3),
    }
    if not (run_dir / "summary.json").is_file():
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
        done = max((r.get("iteration", 0) for r in rows), default=0)
        configured = int(re.search(r"^iterations: (\d+)", config, flags=re.M).group(1))
        result["in_progress"] = {"iterations_done": done, "iterations": configured}
        result["invalid_rate_before"] = round(first["eval/invalid_action_rate"], 3)
        return result
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**result, "wall_seconds": round(summary["wall_seconds"]), "iterations": summary["iterations"],
            "after": round(summary["heldout_success_after"], 3), "gain": round(summary["heldout_gain"], 3),
            "gain_ci": [round(x, 3) for x in summary["heldout_gain_ci"]],
            "invalid_rate": [round(first["eval/invalid_action_rate"], 3), round(last["eval/invalid_action_rate"], 3)],
            "mean_steps": [round(first["eval/mean_steps"], 1), round(last["eval/mean_steps"], 1)],
            # the paired interval's inputs: each held-out task's success rate before and after RL
            "per_task_success": {"before": per_task(first), "after": per_task(last)}}


def per_task(row: dict) -> dict[str, float]:
    prefix = "eval/per_task_success/"
    return {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix)}


HEADLINE = ("**The main job** (`{command}`, seed {seed}, code {code_version}): held-out success "
            "{before:.3f} -> {after:.3f}, gain {gain:+.3f} [{gain_ci[0]:+.3f}, {gain_ci[1]:+.3f}] over "
            "{heldout_tasks} tasks x {episodes_per_task} episodes after {iterations} GiGPO iterations; "
            "invalid-action rate {invalid_rate[0]:.3f} -> {invalid_rate[1]:.3f}, mean steps {mean_steps[0]:.1f} -> "
            "{mean_steps[1]:.1f}. It took {wall_seconds} s ({cpu_seconds} CPU seconds) on a {machine} whose mean "
            "one-minute load average was {mean_load_1min} ([{path}]({path})).\n")


def headline(r: dict, path: str) -> str:
    """The figures block the docs quote (scripts/render_figures.py): its template binds every figure
    to a key of the results file `r`, written to `path`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_figures", ROOT / "scripts" / "render_figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    template = HEADLINE.replace("{path}", path)
    return f"<!-- figures: {path}\n{template}-->\n{figures.render(template, {'r': r})}<!-- /figures -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--command", required=True, help="the exact command that made the run")
    ap.add_argument("--code-version", default=None, help="the commit the run's code was at (default: HEAD here)")
    ap.add_argument("--machine", default="2-core CPU machine (no GPU)")
    ap.add_argument("--load-file", type=Path, help="load averages sampled while it ran")
    ap.add_argument("--time-file", type=Path, help="GNU `time -v` output of the command")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    version = args.code_version or code_version()
    result = record(args.run_dir, args.command, version, args.machine, args.load_file, args.time_file)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if "in_progress" in result:
        done = result["in_progress"]
        print(f"{args.out}: RL had run {done['iterations_done']} of {done['iterations']} iterations (no headline yet)")
    else:
        print(headline(result, str(args.out)))


if __name__ == "__main__":
    main()
