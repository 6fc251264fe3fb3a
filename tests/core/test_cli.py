import json
import subprocess
import sys

from typer.testing import CliRunner

import agentgym
from agentgym.cli import app
from agentgym.toy import COUNTER_ID, register_counter

register_counter()
runner = CliRunner()


def _agentgym(*args):
    """Run the real entry point in a subprocess: what a user sees, exit code included."""
    return subprocess.run([sys.executable, "-m", "agentgym.cli", *args], capture_output=True, text=True)


def test_envs_lists_builtin_ids():
    result = runner.invoke(app, ["envs"])
    assert result.exit_code == 0 and "agentgym/Household-v0" in result.output


def test_rollout_oracle_writes_trajectories_and_a_summary(tmp_path):
    out = tmp_path / "t.jsonl"
    result = runner.invoke(app, ["rollout", COUNTER_ID, "--policy", "oracle", "--tasks", "heldout",
                                 "--episodes", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "success" in result.output and "1.000" in result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 2 * len(agentgym.get_task_space(COUNTER_ID).split("heldout"))
    assert json.loads(lines[0])["success"] is True


def test_rollout_accepts_a_split_file(tmp_path):
    from agentgym.tasks import save_split
    path = tmp_path / "mine.jsonl"
    save_split(path, agentgym.get_task_space(COUNTER_ID).split("train")[:2])
    result = runner.invoke(app, ["rollout", COUNTER_ID, "--policy", "random", "--tasks", str(path)])
    assert result.exit_code == 0, result.output


def test_user_errors_are_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    for args, expected in [
        (["rollout", "agentgym/Nope-v0"], "unknown environment"),
        (["rollout", "agentgym/Household-v0", "--tasks", "validation"], "no split"),
        (["rollout", "agentgym/Household-v0", "--tasks", str(bad)], "bad.jsonl:1"),
        (["rollout", "agentgym/Household-v0", "--policy", "gpt"], "unknown policy"),
        (["play", "agentgym/Household-v0", "--task", "0123456789abcdef"], "unknown task id"),
    ]:
        result = _agentgym(*args)
        assert result.returncode == 2, (args, result.stderr)
        err = result.stderr.strip()
        assert expected in err and "Traceback" not in err, (args, err)
        assert len(err.splitlines()) == 1, err


def test_play_lets_a_person_play_from_stdin():
    task = agentgym.get_task_space(COUNTER_ID).split("train")[4]  # target 2
    result = runner.invoke(app, ["play", COUNTER_ID, "--task", task.task_id], input="help\nfoo\ninc\ninc\n")
    assert result.exit_code == 0, result.output
    assert "inc, dec" in result.output and "not valid" in result.output and "solved" in result.output


def test_play_prints_environment_text_verbatim(monkeypatch):
    from agentgym.toy import CounterEnv
    monkeypatch.setattr(CounterEnv, "_reset", lambda self, task: (
        setattr(self, "count", 0) or setattr(self, "t", 0) or "[doc-7] [bold]x[/bold]", self._info(True)))
    result = runner.invoke(app, ["play", COUNTER_ID], input="quit\n")
    assert "[doc-7] [bold]x[/bold]" in result.output


def test_envs_never_cuts_an_id_on_an_80_column_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = _agentgym("envs").stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    # the ids a fresh process knows (tests register more in this one)
    ids = subprocess.run([sys.executable, "-c", "import agentgym; print(*agentgym.registered_envs())"],
                         capture_output=True, text=True).stdout.split()
    assert len(ids) > 5
    for env_id in ids:
        assert env_id in out, env_id


def test_rollout_help_names_the_ray_extra(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    out = _agentgym("rollout", "--help").stdout
    assert "pip install 'agentgym-credit[ray]'" in out


def test_a_usage_error_is_a_usage_line_not_a_traceback():
    done = _agentgym("eval", "agentgym/Household-v0", "--no-such-option")
    assert done.returncode == 2 and "No such option" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_rollout_refuses_bad_episodes_and_an_unwritable_out_before_playing(tmp_path):
    """--episodes 0 was a ValueError traceback, and an --out under a file a traceback after every
    episode was played: both are one line now, before the first episode."""
    assert "--episodes must be >= 1, got 0" in _agentgym("rollout", "agentgym/Household-v0", "--episodes", "0").stderr
    in_the_way = tmp_path / "afile"
    in_the_way.write_text("x")
    for out, words in ((in_the_way / "t.jsonl", "afile is a file, not a folder"),
                       (tmp_path, "is a folder, not a file")):
        result = runner.invoke(app, ["rollout", COUNTER_ID, "--out", str(out)], standalone_mode=False)
        assert isinstance(result.exception, agentgym.errors.ConfigError) and words in str(result.exception)
        assert "success" not in result.output


def test_an_eoferror_is_not_taken_for_ctrl_c(monkeypatch):
    """click maps any EOFError escaping a command to Abort, which main() exited 130 on with no
    message (issue 38: an empty trainer.pt did that); it now surfaces as the error it is, while a
    real Ctrl-C still exits 130."""
    import pytest
    import typer

    from agentgym import cli

    probe = typer.Typer()

    @probe.command()
    def empty(kind: str):
        if kind == "eof":
            raise EOFError("Ran out of input")
        raise KeyboardInterrupt

    @probe.command()
    def other():
        pass

    monkeypatch.setattr(cli, "app", probe)
    monkeypatch.setattr(sys, "argv", ["agentgym", "empty", "eof"])
    with pytest.raises(EOFError, match="Ran out of input"):
        cli.main()
    monkeypatch.setattr(sys, "argv", ["agentgym", "empty", "ctrl-c"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 130


def test_every_command_has_a_one_line_summary_in_the_command_list():
    """`agentgym --help` lists each command by its docstring's first paragraph, keeping its line
    breaks, so a summary over two lines wrapped mid-sentence there: the first paragraph is one line,
    the details come after a blank line."""
    import inspect

    import typer

    def commands(group, prefix: str = ""):  # typer's own click groups (it vendors click): anything with commands
        for name, command in group.commands.items():
            yield prefix + name, command
            if hasattr(command, "commands"):
                yield from commands(command, f"{prefix}{name} ")

    listed = dict(commands(typer.main.get_command(app)))
    assert {"train", "sft", "view", "gateway", "tasks evolve"} <= set(listed)
    for name, command in listed.items():
        summary = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        assert summary and "\n" not in summary and len(summary) <= 110, f"agentgym {name}: {summary!r}"


def test_a_command_help_is_wrapped_by_the_terminal_not_by_the_docstring():
    """typer keeps a docstring paragraph's line breaks in --help, so `agentgym eval --help` printed
    "...final model the" / "way the trainer did..." in an 80-column terminal: each paragraph now
    reaches the terminal as one line, and lists keep their lines."""
    out = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"}).output
    assert "evaluates a training run's final model the way the trainer did" in out, out

    from agentgym.cli import unwrap_help
    assert unwrap_help("First line.\n\n    one\n    two\n\n    - a\n    - b\n") == "First line.\n\none two\n\n- a\n- b"


def test_sft_does_not_offer_an_env_option_it_lacks():
    """sft's config help said "optional with --env", train's wording: sft has no --env."""
    out = runner.invoke(app, ["sft", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"}).output
    assert "--env" not in out and "YAML config file" in out
    assert "optional with --env" in runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).output
