import json
import sys

import typer
from typer.testing import CliRunner

from agentgym.errors import ConfigError, MissingExtraError, SplitFileError, UnknownEnvError
from agentgym.tasks_cli import register
from agentgym.tasks.pool import TaskPool

app = typer.Typer()
register(app)
runner = CliRunner()
HOUSEHOLD = "agentgym/Household-v0"


def test_list_shows_split_tasks_with_categories():
    result = runner.invoke(app, ["tasks", "list", HOUSEHOLD, "--split", "train", "--limit", "3",
                                 "--category", "pick_and_place/easy"])
    assert result.exit_code == 0, result.output
    import agentgym

    space = agentgym.get_task_space(HOUSEHOLD)
    expected = sum(space.category(t) == "pick_and_place/easy" for t in space.split("train"))
    assert f"{expected} tasks in pick_and_place/easy" in result.output
    assert result.output.count("pick_and_place/easy") == 4  # the title and three rows


def test_evolve_then_stats(tmp_path):
    out = tmp_path / "pool.json"
    result = runner.invoke(app, ["tasks", "evolve", HOUSEHOLD, "--rounds", "3", "--policy", "oracle", "--out",
                                 str(out), "--tasks-per-round", "4", "--group-size", "2", "--seed-tasks", "6",
                                 "--new-per-round", "3", "--min-active", "8"])
    assert result.exit_code == 0, result.output
    pool = TaskPool.load(out)
    meta = json.loads(out.read_text())
    assert len(meta["history"]) == 3 and meta["env_id"] == HOUSEHOLD
    # the oracle solves everything: every rollout is a success in the posteriors
    assert sum(e.trials for e in pool.entries.values()) == 3 * 4 * 2
    assert all(e.successes == e.trials for e in pool.entries.values())
    assert meta["history"][-1]["success_rate"] == 1.0
    assert len(pool) >= 6 + 3 * 3
    result = runner.invoke(app, ["tasks", "stats", str(out), "--png", str(tmp_path / "p.png")])
    assert result.exit_code == 0, result.output
    assert "succ" in result.output and "pick_two_obj_and_place/" in result.output and (tmp_path / "p.png").stat().st_size > 1000


def test_stats_without_matplotlib_shows_the_table_and_draws_only_a_chart_asked_for(tmp_path, monkeypatch):
    out = tmp_path / "pool.json"
    result = runner.invoke(app, ["tasks", "evolve", HOUSEHOLD, "--rounds", "1", "--policy", "oracle", "--out",
                                 str(out), "--tasks-per-round", "2", "--group-size", "2", "--seed-tasks", "4"])
    assert result.exit_code == 0, result.output
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    result = runner.invoke(app, ["tasks", "stats", str(out)])
    assert result.exit_code == 0, result.output
    assert "succ" in result.output and "chart not drawn: matplotlib is not installed" in result.output
    assert not out.with_suffix(".png").exists()
    result = runner.invoke(app, ["tasks", "stats", str(out), "--png", str(tmp_path / "p.png")])  # asked for
    assert isinstance(result.exception, MissingExtraError) and "pip install matplotlib" in str(result.exception)


def test_user_errors_are_agentgym_errors(tmp_path):
    result = runner.invoke(app, ["tasks", "list", "agentgym/Nope-v0"])
    assert isinstance(result.exception, UnknownEnvError)
    result = runner.invoke(app, ["tasks", "evolve", HOUSEHOLD, "--policy", "hf:/no/such/model", "--out",
                                 str(tmp_path / "x.json")])
    assert isinstance(result.exception, ConfigError) and "does not exist" in str(result.exception)
    result = runner.invoke(app, ["tasks", "evolve", HOUSEHOLD, "--rounds", "0"])
    assert isinstance(result.exception, ConfigError)
    (tmp_path / "junk.json").write_text("[1, 2]")
    result = runner.invoke(app, ["tasks", "stats", str(tmp_path / "junk.json")])
    assert isinstance(result.exception, SplitFileError) and "not a task pool file" in str(result.exception)


def test_the_agentgym_app_has_the_tasks_group_and_nothing_imports_torch():
    import subprocess
    import sys

    code = ("import sys, agentgym.tasks.source, agentgym.tasks_cli, agentgym.tasks.generator; "
            "from typer.testing import CliRunner; from agentgym.cli import app; "
            "r = CliRunner().invoke(app, ['tasks', '--help']); "
            "assert r.exit_code == 0 and 'evolve' in r.output, r.output; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_evolve_refuses_an_out_it_cannot_write_before_any_round(tmp_path):
    in_the_way = tmp_path / "afile"
    in_the_way.write_text("x")
    result = runner.invoke(app, ["tasks", "evolve", HOUSEHOLD, "--out", str(in_the_way / "pool.json")],
                           standalone_mode=False)
    assert isinstance(result.exception, ConfigError) and "afile is a file, not a folder" in str(result.exception)
