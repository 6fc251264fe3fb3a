"""What a user copies from the README and docs/ names things that exist: every config override
(`section.key=value`) is a key the config has, and every `agentgym COMMAND --flag` a flag of that
command. A copied line then fails on its value at the worst, never with "unknown key" or "no such
option". Values are not checked here: the docs quote placeholders (`ppo.lr=...`) and combinations
that need other keys beside them."""

import dataclasses
import re
from pathlib import Path

import pytest
import typer

from agentgym.cli import app
from agentgym.errors import ConfigError
from agentgym.trainers.config import TrainConfig, load_config
from agentgym.trainers.estimators import ESTIMATORS

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = sorted(f.name for f in dataclasses.fields(TrainConfig))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OVERRIDE = re.compile(r"(?<![\w./-])((?:%s)\.[A-Za-z_][\w.]*)=" % "|".join(SECTIONS))


def quoted_keys() -> dict[str, str]:
    """{key: the first file that quotes it}, over the README and docs/*.md."""
    keys: dict[str, str] = {}
    for path in DOCS:
        for key in OVERRIDE.findall(path.read_text(encoding="utf-8")):
            keys.setdefault(key.rstrip("."), path.name)
    return keys


def unknown_key_error(key: str) -> str | None:
    """The loader's error when `key` is not a config key; None when it is (whatever it says of a
    placeholder value). An estimator option is a key when some estimator declares it."""
    if key.startswith("estimator.options."):
        option = key.split(".", 2)[2]
        owners = [name for name, spec in ESTIMATORS.items() if option in spec.options]
        return None if owners else f"no estimator declares the option {option!r}"
    try:
        load_config("household-tiny", [f"{key}=1"])
    except (ConfigError, SystemExit) as e:
        return str(e) if str(e).startswith("unknown key") else None
    return None


def test_the_docs_quote_overrides():
    assert len(quoted_keys()) > 50  # the pattern still finds the docs' overrides


@pytest.mark.parametrize("key,where", sorted(quoted_keys().items()))
def test_each_quoted_override_is_a_config_key(key, where):
    assert unknown_key_error(key) is None, f"{where} quotes {key}=..., which the config does not have"


def test_a_misspelt_key_is_found():
    assert "did you mean ppo.lr" in unknown_key_error("ppo.lrr")
    assert "did you mean env.chat.history" in unknown_key_error("env.chat.histry")
    assert unknown_key_error("estimator.options.clip_hihg") is not None
    assert unknown_key_error("estimator.options.clip_high") is None


# --- agentgym COMMAND [SUBCOMMAND] --flag ----------------------------------------------------------
def quoted_flags() -> dict[tuple[str, str], str]:
    """{(command, flag): the first file that quotes it}: the --flags after `agentgym COMMAND` inside
    one code span or code-block line, up to a shell operator."""
    flags: dict[tuple[str, str], str] = {}
    for path in DOCS:
        for line in path.read_text(encoding="utf-8").splitlines():
            for span in line.split("`"):
                for name, rest in re.findall(r"\bagentgym ([a-z][\w-]*)((?: [^;|&#]*)?)", span):
                    words = rest.split()
                    command = " ".join([name, *words[:1]]) if words and not words[0].startswith("-") else name
                    for word in words:
                        if word.startswith("--"):
                            flags.setdefault((command, word.split("=")[0].rstrip(".,:)")), path.name)
    return flags


def unknown_flag_error(command: str, flag: str) -> str | None:
    """None when `agentgym COMMAND` (a subcommand where it has them) takes `flag`; else why not. A
    word after the command that is no subcommand is an argument: the command's own flags count."""
    name, *sub = command.split()
    cmd = typer.main.get_command(app).commands.get(name)
    if cmd is None:
        return None  # the docs' own words ("agentgym is ..."), not a command
    if sub and sub[0] in getattr(cmd, "commands", {}):
        cmd = cmd.commands[sub[0]]
    known = {"--help"} | {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    return None if flag in known else f"agentgym {command} has no {flag}; its flags: {', '.join(sorted(known))}"


def test_the_docs_quote_commands_with_flags():
    assert len(quoted_flags()) > 30


@pytest.mark.parametrize("command,flag,where", sorted((c, f, w) for (c, f), w in quoted_flags().items()))
def test_each_quoted_flag_is_a_flag_of_its_command(command, flag, where):
    assert unknown_flag_error(command, flag) is None, f"{where}: {unknown_flag_error(command, flag)}"


def test_a_wrong_flag_is_found():
    assert "has no --episode" in unknown_flag_error("rollout agentgym/Household-v0", "--episode")
    assert unknown_flag_error("tasks evolve", "--rounds") is None
    assert unknown_flag_error("tasks list", "--rounds") is not None
