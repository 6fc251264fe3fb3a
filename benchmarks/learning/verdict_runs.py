"""Experiments built on the verdict's runs (docs/verdict.md): reading its results and jobs folder,
adopting its warm starts, the paired difference of two arms over seeds, and the arguments every such
runner takes. benchmarks/learning/tree_vs_baselines.py and sft_then_rl.py read the verdict this way;
the verdict's folder and results are never written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.harness.provenance import ROOT  # noqa: E402
from benchmarks.learning import verdict  # noqa: E402


def add_arguments(parser: argparse.ArgumentParser, setting: str, name: str) -> None:
    """The arguments of a runner on the verdict's `setting`: its own jobs folder and results file
    (runs/NAME, docs/NAME.json), the verdict's (read only), and the scheduler's."""
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, one thread each")
    parser.add_argument("--runs", default=f"runs/{name}", help="this runner's jobs folder")
    parser.add_argument("--verdict-runs", default=f"runs/verdict_{setting}",
                        help="the verdict experiment's jobs folder (read only): its warm starts and runs")
    parser.add_argument("--verdict-json", default=str(ROOT / "docs" / "verdict.json"),
                        help="the verdict experiment's results (read only)")
    parser.add_argument("--out", default=str(ROOT / "docs" / f"{name}.json"))
    parser.add_argument("--report-only", action="store_true", help="rewrite --out from the finished runs")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: one run, in its own process
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for every job: the verdict's own")


def verdict_results(args) -> tuple[dict, dict]:
    """The verdict's results of args.setting (docs/verdict.json) and its finished jobs: those recorded there
    (paths in --verdict-runs), updated by its jobs folder's own done-table (fresher; read only)."""
    path, root = Path(args.verdict_json), Path(args.verdict_runs)
    whole = json.loads(path.read_text()).get(args.setting, {}) if path.is_file() else {}
    records = {key: verdict.local(record, root) for key, record in whole.get("jobs", {}).items()}
    if (root / "done.json").is_file():
        records.update(rr.DoneTable(root / "done.json").done)
    return whole, records


def check_verdict_settings(args, whole: dict) -> None:
    """The verdict's runs are this protocol's only when made with the same overrides: refuse in one line."""
    expected = verdict.job_overrides(args)
    found = {str(args.verdict_json): whole.get("overrides")}
    settings = Path(args.verdict_runs) / "settings.json"
    if settings.is_file():
        saved = json.loads(settings.read_text())
        if saved.get("setting") != args.setting:
            raise SystemExit(f"{args.verdict_runs} holds the verdict's {saved.get('setting')!r} setting, not "
                             f"{args.setting!r}: point --verdict-runs at its {args.setting} jobs")
        found[str(settings)] = saved.get("overrides")
    if all(v is None for v in found.values()):
        raise SystemExit(f"no verdict experiment in {args.verdict_json} nor {args.verdict_runs}: run "
                         f"benchmarks/learning/verdict.py --setting {args.setting} first, or point --verdict-json and "
                         "--verdict-runs at its results and jobs")
    for where, overrides in found.items():
        if overrides is not None and overrides != expected:
            raise SystemExit(f"the verdict's runs ({where}) were made with overrides {overrides}, these with "
                             f"{expected}: give the verdict's own overrides after --")


def adopt_warm_starts(args, table: rr.DoneTable, records: dict, all_jobs: list[rr.Job]) -> None:
    """Mark each warm start the verdict built (its model on disk, built with these settings) as
    done in this table, so no job builds it again; one whose model is missing, and that a pending
    run needs, is left to its job (the verdict's warm job, in this runs folder), with one line."""
    needed = {k for j in all_jobs if j.key not in table for k in j.after if k.startswith("warm/")}
    for job in all_jobs:
        key = job.key
        if not key.startswith("warm/") or key in table:
            continue
        record = records.get(key)
        if record is None:
            if key in needed:
                print(f"{key}: the verdict has not built it: built here by the verdict's warm job")
            continue
        model = Path(record["model"])
        if model.is_dir():
            try:
                rr.check_shared_warm(verdict.config(args, rr.arm_and_seed(key)[1], model.parent), model.parent)
            except SystemExit:
                raise SystemExit(f"{model} was built from other settings than the verdict's: point --verdict-runs "
                                 "at the verdict's jobs folder") from None
            table.mark(key, {**record, "source": f"verdict {key}"})
        elif key in needed:
            print(f"{key}: the verdict's warm model {model} is not on this machine: rebuilt here by the verdict's "
                  "warm job (SFT from the seed is repeatable)")


def difference(found: dict, a: str, b: str, planned_seeds: int) -> dict | None:
    """a - b on the held-out set, paired per task within each seed both have: the mean, its 95% t
    interval over seeds (the protocol's) and the pooled task bootstrap (evaluation noise only)."""
    seeds = sorted(set(found[a]) & set(found[b]))
    if not seeds:
        return None
    d = rr.paired_diff([found[a][s]["heldout"]["per_task_success"] for s in seeds],
                       [found[b][s]["heldout"]["per_task_success"] for s in seeds])
    ci = d["seed_ci"]
    provisional = "" if len(seeds) == planned_seeds else f" (provisional: {len(seeds)} of {planned_seeds} seeds)"
    said = ("fewer than two seeds: no interval" if ci is None else
            f"{a} higher" if ci[0] > 0 else f"{a} lower" if ci[1] < 0 else "no detected difference") + provisional
    return {"seeds": seeds, "mean": d["diff"], "per_seed": d["per_seed"], "interval_over_seeds": ci,
            "pooled_ci_evaluation_noise_only": d["ci"], "pairs": d["pairs"], "result": said}


def portable(record: dict, args) -> dict:
    text = json.dumps(verdict.portable(record, Path(args.runs)))
    return json.loads(text.replace(json.dumps(str(Path(args.verdict_runs).resolve()))[1:-1], "VERDICT_RUNS"))
