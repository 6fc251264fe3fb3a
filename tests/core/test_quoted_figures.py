"""Issue 53, item 3: one figure per claim. A figure the README or docs quote stands in a block

    <!-- figures: docs/results/NAME.json [MORE.json ...] -->  ...  <!-- /figures -->

naming the results files it came from (written by a script, with the command and the code version
that produced it: benchmarks/record_run.py). Every number in the block, outside code spans, must be
a value of that file at the precision shown, and the file's command must be in the block."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^<!-- figures: ([^>]+?) -->$(.*?)^<!-- /figures -->$", flags=re.S | re.M)
NUMBER = re.compile(r"(?<![\w.\-/])([+\-−]?)(\d+(?:\.\d+)?)(?![\w%])")


def _values(data) -> list[float]:
    """Every number in a results file, including those written inside its strings."""
    if isinstance(data, bool):
        return []
    if isinstance(data, (int, float)):
        return [float(data)]
    if isinstance(data, str):
        return [float(m) for m in re.findall(r"\d+(?:\.\d+)?", data)]
    items = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    return [v for item in items for v in _values(item)]


def disagreements(text: str, *results: dict) -> list[str]:
    """The figures of a block's text that its results files do not hold, and a missing command."""
    problems = [f"the command {r['command']!r} is not quoted" for r in results
                if " ".join(r["command"].split()) not in " ".join(text.replace("\\|", "|").split())]
    prose = re.sub(r"`[^`]*`|\]\([^)]*\)", " ", text)  # commands and link targets are not figures
    values = [v for r in results for v in _values(r)]
    for sign, digits in NUMBER.findall(prose):
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        negative = sign in "-−" and sign != ""
        if not any(f"{abs(v):.{decimals}f}" == digits and (v < 0) == negative for v in values):
            problems.append(f"{sign}{digits}")
    return problems


def _blocks():
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(f.relative_to(ROOT), path, text) for f in files
            for path, text in BLOCK.findall(f.read_text(encoding="utf-8"))]


def test_the_readme_quotes_its_headline_figures_from_results_files():
    assert [b for b in _blocks() if str(b[0]) == "README.md"]


@pytest.mark.parametrize("where,paths,text", _blocks(), ids=[f"{b[0]}:{b[1]}" for b in _blocks()])
def test_each_quoted_figure_is_its_results_files(where, paths, text):
    results = [json.loads((ROOT / path).read_text()) for path in paths.split()]
    assert all(r.get("code_version") for r in results), f"{paths}: a file names no code_version"
    assert not disagreements(text, *results), f"{where} quotes what {paths} do not hold: {disagreements(text, *results)}"


def test_a_figure_that_differs_from_its_file_is_found():
    results = {"command": "agentgym train household-tiny torch_threads=1", "code_version": "abc1234",
               "before": 0.321, "after": 0.487, "gain": 0.167, "gain_ci": [0.115, 0.216], "heldout_tasks": 234}
    good = "`agentgym train household-tiny torch_threads=1`: 0.321 -> 0.487, +0.167 [+0.115, +0.216] on 234 tasks"
    assert disagreements(good, results) == []
    assert disagreements(good.replace("0.487", "0.532"), results) == ["0.532"]
    assert disagreements(good.replace("+0.167", "-0.167"), results) == ["-0.167"]
    assert disagreements(good.replace("torch_threads=1", "torch_threads=2"), results)


def test_the_recorded_headline_quotes_only_its_results_file():
    """benchmarks/record_run.py prints the markdown the README quotes: it must pass the check above."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_run", ROOT / "benchmarks" / "record_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = {"command": "agentgym train household-tiny torch_threads=1", "code_version": "b4da05d",
               "machine": "2-core CPU machine (no GPU)", "torch_threads": 1, "mean_load_1min": 9.4,
               "wall_seconds": 3012, "cpu_seconds": 2950.2, "seed": 0, "iterations": 60, "heldout_tasks": 234,
               "episodes_per_task": 4, "before": 0.321, "after": 0.487, "gain": 0.167, "gain_ci": [0.115, 0.216],
               "invalid_rate": [0.318, 0.418], "mean_steps": [11.1, 9.9]}
    text = module.headline(results, "docs/results/main_job.json")
    assert disagreements(text, results) == [] and "0.487" in text and "3012 s" in text
