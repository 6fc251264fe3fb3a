"""Every figure the README and docs quote is bound to a key of a committed results file (issue 68,
item 1). A block is

    <!-- figures: docs/results/NAME.json
    TEMPLATE with {key.path:format} placeholders
    -->
    the rendered text readers see
    <!-- /figures -->

and scripts/render_figures.py writes the text from the template. The checks: the text is exactly
the template's render from the files as committed, the template writes no number of its own, each
file names its code version, and a file's command is shown with its figures."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("render_figures", ROOT / "scripts" / "render_figures.py")
figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(figures)


def _blocks():
    return [(doc.relative_to(ROOT), files, template, shown) for doc in figures.documents()
            for _, files, template, shown in figures.blocks(doc.read_text(encoding="utf-8"))]


def test_the_readme_quotes_its_headline_figures_from_results_files():
    assert [b for b in _blocks() if str(b[0]) == "README.md"]


def test_no_block_is_left_in_the_old_unbound_form():
    """`<!-- figures: FILE -->` on one line was the unbound form: numbers checked only for presence."""
    for doc in figures.documents():
        assert not re.search(r"^<!-- figures: [^\n]*-->$", doc.read_text(encoding="utf-8"), flags=re.M), doc


@pytest.mark.parametrize("where,files,template,shown", _blocks(), ids=[f"{b[0]}:{b[1]}" for b in _blocks()])
def test_each_block_is_the_render_of_its_files(where, files, template, shown):
    assert not figures.check_block(files, template, shown), f"{where}: {figures.check_block(files, template, shown)}"
    for name in figures.file_paths(files):
        data = json.loads((ROOT / name).read_text())
        assert data.get("code_version"), f"{name} names no code_version"
        if isinstance(data.get("command"), str):
            assert " ".join(data["command"].split()) in " ".join(shown.replace("\\|", "|").split()), \
                f"{where}: the command of {name} is not shown with its figures"


# --- wrong figures are found ---------------------------------------------------------------------
OLD_RESULTS = {"command": "agentgym train household-tiny torch_threads=1", "code_version": "b4da05d",
               "cpu_seconds": 923.6, "seed": 0, "heldout_tasks": 234, "episodes_per_task": 4, "before": 0.321,
               "after": 0.498, "gain": 0.177, "gain_ci": [0.128, 0.226], "invalid_rate": [0.318, 0.396],
               "mean_steps": [10.9, 9.6], "iterations": 60}
OLD_TEMPLATE = ("| main job, seed {seed}: `{command}` (code {code_version}; {cpu_seconds:.1f} CPU seconds) | "
                "{before:.3f} -> {after:.3f} over {heldout_tasks} tasks x {episodes_per_task} | "
                "{gain:+.3f} [{gain_ci[0]:+.3f}, {gain_ci[1]:+.3f}] | {iterations} iterations |\n")
# the eleven wrong edits a review made to the README's main-job row; nine passed the old check
WRONG_EDITS = [("0.498", "0.532"), ("+0.177", "+0.200"), ("[+0.128, +0.226]", "[+0.154, +0.247]"),
               ("0.321 -> 0.498", "0.498 -> 0.321"), ("234 tasks x 4", "234 tasks x 60"), ("923.6", "2.0"),
               ("+0.128", "+0.226"), ("seed 0", "seed 4"), ("60 iterations", "0.6 iterations"),
               ("0.321", "0.332"), ("+0.226]", "+0.247]")]


def test_each_of_the_eleven_wrong_edits_is_found(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(OLD_RESULTS))
    shown = figures.render(OLD_TEMPLATE, {"r": OLD_RESULTS})
    assert figures.check_block("r.json", OLD_TEMPLATE, shown, root=tmp_path) == []
    for old, new in WRONG_EDITS:
        assert old in shown
        assert figures.check_block("r.json", OLD_TEMPLATE, shown.replace(old, new, 1), root=tmp_path), (old, new)


def test_a_changed_result_or_a_hard_coded_number_is_found(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(OLD_RESULTS))
    shown = figures.render(OLD_TEMPLATE, {"r": OLD_RESULTS})
    (tmp_path / "r.json").write_text(json.dumps({**OLD_RESULTS, "after": 0.5}))  # re-run, docs not re-rendered
    assert figures.check_block("r.json", OLD_TEMPLATE, shown, root=tmp_path)
    hard = OLD_TEMPLATE.replace("{after:.3f}", "0.498")
    assert any("0.498" in p for p in figures.check_block("r.json", hard, shown, root=tmp_path))
    assert figures.check_block("r.json", OLD_TEMPLATE.replace("{after", "{aftr"), shown, root=tmp_path)


def test_every_number_of_each_real_block_is_bound():
    """Perturb each figure shown in the README and docs, one at a time: every change is found."""
    checked = 0
    for where, files, template, shown in _blocks():
        for match in figures.NUMBER.finditer(re.sub(r"`[^`]*`|\]\([^)]*\)", lambda m: " " * len(m.group(0)), shown)):
            wrong = shown[:match.start()] + match.group(0) + "1" + shown[match.end():]
            assert figures.check_block(files, template, wrong), f"{where}: {match.group(0)} is not bound"
            checked += 1
    assert checked >= 10


def test_key_paths_and_several_files():
    data = {"arms": {"gigpo": {"seeds": [{"after": 0.5}, {"after": 0.61}]}}, "ci": [-0.01, 0.2]}
    assert figures.render("{arms.gigpo.seeds[1].after:.2f} {ci[0]:+.3f} {{x}}", {"a": data}) == "0.61 -0.010 {x}"
    assert figures.render("{a/ci[1]:.1f} / {b/n}", {"a": data, "b": {"n": 7}}) == "0.2 / 7"
    with pytest.raises(figures.FigureError):
        figures.render("{ci[1]}", {"a": data, "b": {}})  # several files: the stem is required


def test_the_recorded_headline_is_a_bound_block(tmp_path):
    """benchmarks/harness/record_run.py prints the block the docs quote: it passes the check as printed."""
    spec = importlib.util.spec_from_file_location("record_run", ROOT / "benchmarks" / "harness" / "record_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = {**OLD_RESULTS, "machine": "2-core CPU machine (no GPU)", "mean_load_1min": 9.4, "wall_seconds": 3012}
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "r.json").write_text(json.dumps(results))
    block = module.headline(results, "docs/r.json")
    (_, files, template, shown), = figures.blocks(block + "\n")
    assert figures.check_block(files, template, shown, root=tmp_path) == []
    assert "0.498" in shown and "3012 s" in shown and "{after" in template
