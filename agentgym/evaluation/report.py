"""Evaluation reports: report.json, report.md and a PNG plot; comparisons of several results.

    paths = write_report(result, "runs/eval/household")          # one evaluation
    text = compare({"warm start": r0, "GiGPO": r1}, "runs/cmp")   # side by side, with deltas

matplotlib is imported only when a plot is drawn (Agg backend, no display needed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping, Sequence

from agentgym.errors import AgentGymError
from agentgym.safe_files import UnsafeFileError, read_json
from agentgym.figures import pyplot_agg, save_figure
from agentgym.evaluation.evaluate import METRIC_NAMES, EvalResult, GroupMetrics
from agentgym.evaluation.stats import Estimate, newcombe_difference
from agentgym.trajectory import save_trajectories as write_trajectories




LABELS = {
    "success_rate": "success rate",
    "mean_score": "mean score",
    "mean_steps": "mean steps",
    "invalid_action_rate": "invalid-action rate",
}


class ReportError(AgentGymError):
    pass


# --- formatting -----------------------------------------------------------------------------

def _num(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _ci(est: Estimate, digits: int = 3) -> str:
    if est.n == 0 or math.isnan(est.low):
        return "n/a"
    return f"[{est.low:.{digits}f}, {est.high:.{digits}f}]"


def _with_ci(est: Estimate, digits: int = 3) -> str:
    return est.format(digits)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _units(name: str, est: Estimate) -> str:
    return f"{est.n} steps" if name == "invalid_action_rate" else f"{est.n} episodes"


def render_markdown(result: EvalResult, title: str | None = None) -> str:
    """The report as markdown: overall metrics with CIs, pass@k, per-category table, infra errors."""
    r, o = result, result.overall
    conf = int(round(100 * o.success_rate.confidence))
    lines = [f"# {title or f'Evaluation of {r.policy} on {r.env_id} ({r.split})'}", ""]
    lines.append(
        f"{r.num_tasks} tasks x {r.episodes_per_task} episode(s): {o.episodes} episodes scored, "
        f"{r.infra_errors} infra error(s) excluded; {conf}% confidence intervals; {r.wall_seconds:.1f} s."
    )
    lines += ["", "## Metrics", ""]
    rows = [[LABELS[name], _num(getattr(o, name).value), _ci(getattr(o, name)), _units(name, getattr(o, name))]
            for name in METRIC_NAMES]
    rows += [[f"pass@{k}", _num(est.value), _ci(est), f"{est.n} tasks"] for k, est in r.pass_at_k.items()]
    lines += _table(["metric", "value", f"{conf}% CI", "n"], rows)

    lines += ["", "## By category", ""]
    header = ["category", "tasks", "episodes"] + [f"{LABELS[n]} [{conf}% CI]" for n in METRIC_NAMES]
    rows = [[name, str(m.tasks), str(m.episodes)] + [_with_ci(getattr(m, n)) for n in METRIC_NAMES]
            for name, m in r.categories.items()]
    lines += _table(header, rows)

    for i, part in enumerate(r.category_parts, 1):
        example = next(iter(r.categories), "")
        lines += ["", f"## By category, part {i} of {len(r.category_parts)} "
                  f"(`{example.split('/')[i - 1]}` in `{example}`)", ""]
        rows = [[name, str(m.tasks), str(m.episodes)] + [_with_ci(getattr(m, n)) for n in METRIC_NAMES]
                for name, m in part.items()]
        lines += _table(header, rows)

    if r.infra_errors:
        lines += ["", "## Infra errors", "",
                  f"{r.infra_errors} episode(s) broke for reasons outside the agent and are left out of every "
                  "metric above. Distinct messages:", ""]
        lines += [f"- `{msg}`" for msg in r.infra_error_messages]

    lines += ["", "Intervals: Wilson score interval for the success rate at the effective number of episodes "
              "(a task's episodes are correlated: the design effect of clustering by task); percentile cluster bootstrap "
              "(2000 resamples of tasks, seeded) for the other metrics and pass@k. pass@k is the unbiased "
              "estimator of Chen et al. (2021), averaged over tasks with at least k scored episodes.", ""]
    return "\n".join(lines)


# --- plots ----------------------------------------------------------------------------------

def _errbars(ests: Sequence[Estimate]) -> list[list[float]]:
    lows = [0.0 if e.n == 0 or math.isnan(e.low) else max(0.0, e.value - e.low) for e in ests]
    highs = [0.0 if e.n == 0 or math.isnan(e.high) else max(0.0, e.high - e.value) for e in ests]
    return [lows, highs]


def _values(ests: Sequence[Estimate]) -> list[float]:
    return [0.0 if e.n == 0 or math.isnan(e.value) else e.value for e in ests]


#: Above this many categories the plot shows each part of "a/b" categories instead (6 task
#: types + 3 difficulties read better than 18 combinations).
MAX_PLOTTED_CATEGORIES = 10


def _plot_groups(result: EvalResult) -> tuple[list[str], list[GroupMetrics]]:
    names, groups = ["overall"], [result.overall]
    if len(result.categories) > MAX_PLOTTED_CATEGORIES and result.category_parts:
        for part in result.category_parts:
            names += list(part)
            groups += list(part.values())
    else:
        names += list(result.categories)
        groups += list(result.categories.values())
    return names, groups


def _part_index(result: EvalResult, names: list[str]) -> list[int]:
    """Which category part each plotted name comes from (0 when plotting whole categories)."""
    if len(result.categories) <= MAX_PLOTTED_CATEGORIES or not result.category_parts:
        return [0] * len(names)
    index = []
    for i, part in enumerate(result.category_parts):
        index += [i] * len(part)
    return index


def plot_result(result: EvalResult, out_png: str | Path, title: str | None = None) -> Path:
    """Success rate per category (+ overall) with CI bars, and pass@k (or mean score) beside it."""
    plt = pyplot_agg()
    names, groups = _plot_groups(result)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.4 * len(names) + 2.6),
                                      gridspec_kw={"width_ratios": [3, 2]})
    ests = [g.success_rate for g in groups]
    ys = list(range(len(names)))[::-1]
    colors = ["C0"] + [f"C{1 + (part % 8)}" for part in _part_index(result, names[1:])]
    left.barh(ys, _values(ests), xerr=_errbars(ests), color=colors, capsize=3)
    left.set_yticks(ys, names)
    left.set_xlim(0, 1.22)  # room right of the CI bars for the labels
    left.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    conf = int(round(100 * ests[0].confidence))
    left.set_xlabel(f"success rate ({conf}% CI)")
    for y, e in zip(ys, ests):
        if e.n:
            left.text(e.high + 0.015, y, f"{e.value:.2f} (n={e.n})", va="center", fontsize=8)
    if len(result.pass_at_k) > 1:
        ks = list(result.pass_at_k)
        pk = [result.pass_at_k[k] for k in ks]
        right.plot(ks, _values(pk), marker="o", color="C2")
        right.fill_between(ks, [e.low if e.n else 0 for e in pk], [e.high if e.n else 0 for e in pk],
                           color="C2", alpha=0.2)
        right.set_xlabel("k")
        right.set_ylabel("pass@k")
        right.set_xticks(ks)
        right.set_ylim(0, 1.02)
    else:
        ests = [g.mean_score for g in groups]
        right.barh(ys, _values(ests), xerr=_errbars(ests), color="C2", capsize=3)
        right.set_yticks(ys, names)
        right.set_xlim(0, 1)
        right.set_xlabel("mean score")
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title or f"{result.policy} on {result.env_id} ({result.split})", fontsize=11)
    return save_figure(fig, out_png)


# --- files ----------------------------------------------------------------------------------

def write_report(result: EvalResult, out_dir: str | Path, *, plot: bool = True, title: str | None = None,
                 save_trajectories: bool = False) -> dict[str, Path]:
    """Write report.json, report.md and report.png (and trajectories.jsonl if asked) to out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md"}
    paths["json"].write_text(json.dumps(result.to_dict(), indent=2, default=str, allow_nan=False) + "\n")
    paths["markdown"].write_text(render_markdown(result, title))
    if plot:
        paths["plot"] = plot_result(result, out / "report.png", title)
    if save_trajectories and result.trajectories:
        paths["trajectories"] = out / "trajectories.jsonl"
        write_trajectories(paths["trajectories"], result.trajectories)
    return paths


# A report holds per-task figures, not episodes: a few MB for thousands of tasks; a larger file is not one.
MAX_REPORT_BYTES = 512 << 20


def load_report(path: str | Path) -> EvalResult:
    """An EvalResult from a report.json (or the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    if not path.is_file():
        raise ReportError(f"no evaluation report at {path}: pass a report.json written by `agentgym eval --out`")
    try:
        return EvalResult.from_dict(read_json(path, MAX_REPORT_BYTES, "evaluation report"))
    except UnsafeFileError as exc:  # not JSON, nested too deeply, too large, not a regular file
        raise ReportError(f"{path} is not an agentgym evaluation report ({exc})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"{path} is not an agentgym evaluation report ({type(exc).__name__}: {exc})") from None


# --- comparisons ----------------------------------------------------------------------------

def _labelled(results: Mapping[str, EvalResult] | Sequence[EvalResult]) -> dict[str, EvalResult]:
    if isinstance(results, Mapping):
        labelled = dict(results)
    else:
        labelled = {}
        for r in results:
            label, i = r.policy, 2
            while label in labelled:
                label, i = f"{r.policy} ({i})", i + 1
            labelled[label] = r
    if not labelled:
        raise ReportError("nothing to compare: pass at least one evaluation result")
    return labelled


def comparability_warnings(results: Mapping[str, EvalResult] | Sequence[EvalResult]) -> list[str]:
    """One line per report whose figures are not comparable with the first one's: another env,
    task set, episodes per task, env settings, chat layout or sampling (the seed may differ).
    Settings an older report did not record are not compared."""
    runs = _labelled(results)
    base_label, base = next(iter(runs.items()))

    def sampling(r: EvalResult) -> dict | None:
        s = r.metadata.get("sampling")
        return None if s is None else {k: s.get(k) for k in ("temperature", "top_p", "max_new_tokens")}

    def tasks(r: EvalResult) -> set:
        return {t["task_id"] for t in r.per_task}

    warnings = []
    for label, r in list(runs.items())[1:]:
        diffs = []
        if r.env_id != base.env_id:
            diffs.append(f"env {base.env_id} vs {r.env_id}")
        if tasks(r) != tasks(base):
            diffs.append(f"tasks ({base.split}: {len(tasks(base))} vs {r.split}: {len(tasks(r))}, "
                         f"{len(tasks(r) & tasks(base))} shared)")
        if r.episodes_per_task != base.episodes_per_task:
            diffs.append(f"episodes per task {base.episodes_per_task} vs {r.episodes_per_task}")
        for key, name in (("env_kwargs", "env settings"), ("chat", "chat layout")):
            a, b = base.metadata.get(key), r.metadata.get(key)
            if a is not None and b is not None and a != b:
                changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                diffs.append(f"{name} ({', '.join(f'{k} {a.get(k)!r} vs {b.get(k)!r}' for k in changed[:3])})")
        a, b = sampling(base), sampling(r)
        if a is not None and b is not None and a != b:
            diffs.append("sampling (" + ", ".join(f"{k} {a[k]} vs {b[k]}" for k in a if a[k] != b[k]) + ")")
        if diffs:
            warnings.append(f"{label} vs {base_label}: {'; '.join(diffs)}: the figures are not comparable")
    return warnings


def compare_markdown(results: Mapping[str, EvalResult] | Sequence[EvalResult], title: str = "Comparison") -> str:
    """One markdown table of several results (rows) with CIs, the success-rate difference to the
    first result (Newcombe interval), and a per-category success table."""
    runs = _labelled(results)
    base_label, base = next(iter(runs.items()))
    conf = int(round(100 * base.overall.success_rate.confidence))
    common_k = min(r.episodes_per_task for r in runs.values())
    envs = sorted({r.env_id for r in runs.values()})
    splits = sorted({r.split for r in runs.values()})
    lines = [f"# {title}", "", f"Environment {', '.join(envs)}; split {', '.join(splits)}; {conf}% CIs.", ""]
    header = ["run", "episodes", "infra errors"] + [LABELS[n] for n in METRIC_NAMES]
    header += [f"pass@{common_k}"] if common_k > 1 else []
    header += [f"Δ success vs {base_label}"]
    rows = []
    for label, r in runs.items():
        o = r.overall
        row = [label, str(o.episodes), str(r.infra_errors)] + [_with_ci(getattr(o, n)) for n in METRIC_NAMES]
        if common_k > 1:
            row.append(_with_ci(r.pass_at_k[common_k]))
        if label == base_label:
            row.append("-")
        else:
            diff = newcombe_difference(o.success_rate, base.overall.success_rate)
            row.append("n/a" if diff.n == 0 else f"{diff.value:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]")
        rows.append(row)
    lines += _table(header, rows)

    categories = sorted({c for r in runs.values() for c in r.categories})
    if len(categories) > 1:
        lines += ["", "## Success rate by category", ""]
        rows = [[c] + [_with_ci(r.categories[c].success_rate) if c in r.categories else "-" for r in runs.values()]
                for c in categories]
        lines += _table(["category"] + list(runs), rows)
    lines += ["", f"Δ: difference in success rate to {base_label} with Newcombe's hybrid score interval "
              "(independent samples; conservative when both runs played the same tasks).", ""]
    return "\n".join(lines)


def plot_comparison(results: Mapping[str, EvalResult] | Sequence[EvalResult], out_png: str | Path,
                    title: str = "Success rate") -> Path:
    """Grouped bars: success rate overall and per category, one bar per run, with CI bars."""
    runs = _labelled(results)
    names = sorted({c for r in runs.values() for c in r.categories})
    lookup = [r.categories for r in runs.values()]
    if len(names) > MAX_PLOTTED_CATEGORIES and all(r.category_parts for r in runs.values()):
        # many "a/b" categories: bars per task type and per difficulty instead
        depth = min(len(r.category_parts) for r in runs.values())
        names, lookup = [], [{} for _ in runs]
        for position in range(depth):
            part_names = sorted({c for r in runs.values() for c in r.category_parts[position]})
            names += part_names
            for merged, r in zip(lookup, runs.values()):
                merged.update(r.category_parts[position])
    categories = ["overall"] + (names if len(names) > 1 else [])  # one category repeats the overall bar
    plt = pyplot_agg()
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(min(14.0, max(5.0, 2 + len(categories) * (0.5 + 0.25 * len(runs)))), 4.0))
    for i, ((label, r), groups) in enumerate(zip(runs.items(), lookup)):
        ests = [r.overall.success_rate if c == "overall" else
                (groups[c].success_rate if c in groups else Estimate(math.nan, 0, 0, 0))
                for c in categories]
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(categories))]
        ax.bar(xs, _values(ests), width=width, yerr=_errbars(ests), capsize=3, label=label, color=f"C{i % 10}")
    ax.set_xticks(range(len(categories)), categories, rotation=20 if len(categories) > 4 else 0, ha="right"
                  if len(categories) > 4 else "center")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.grid(alpha=0.3, axis="y")
    # Legend above the axes: bars at 1.0 would hide under it inside.
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(len(runs), 4), frameon=False)
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, out_png)


def compare(results: Mapping[str, EvalResult] | Sequence[EvalResult], out_dir: str | Path | None = None,
            title: str = "Comparison", plot: bool = True) -> str:
    """compare_markdown, and with out_dir also compare.md, compare.json and compare.png there."""
    text = compare_markdown(results, title)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        runs = _labelled(results)
        (out / "compare.json").write_text(json.dumps({k: r.to_dict() for k, r in runs.items()}, indent=2,
                                                     default=str, allow_nan=False) + "\n")
        if plot:
            plot_comparison(runs, out / "compare.png", title)
    return text
