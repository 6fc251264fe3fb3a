"""`agentgym tasks ...`: list split tasks, run the self-evolving generator on its own, show a pool.

    agentgym tasks list agentgym/Household-v0 --split train --limit 20
    agentgym tasks evolve agentgym/Household-v0 --rounds 10 --policy random --out pool.json
    agentgym tasks stats pool.json --png pool.png

`evolve` alternates generator rounds (retire mastered / impossible tasks, propose and validate new
ones) with rollouts of the chosen policy on tasks the curriculum picks; the rollouts update the
pool's success posteriors. `stats` prints the pool by category (table) and draws it (PNG).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentgym.figures import NO_MATPLOTLIB, can_plot, pyplot_agg, save_figure
from agentgym.progress import output_console

console = output_console()


def _fmt_params(params: dict, width: int = 90) -> str:
    text = ", ".join(f"{k}={v}" for k, v in params.items())
    return text if len(text) <= width else text[: width - 1] + "…"


def pool_table(pool, title: str) -> Table:
    table = Table(title=title, caption="act: active tasks, m/i: retired as mastered / impossible, runs: rollouts, "
                  "succ: pooled posterior mean success, mean: mean posterior of the active tasks")
    table.add_column("category", overflow="fold", min_width=min(26, max((len(c) for c in pool.category_stats()),
                                                                       default=8)))
    for col in ("tasks", "act", "m/i", "runs", "succ", "mean"):
        table.add_column(col, justify="right", no_wrap=True)
    for cat, c in pool.category_stats().items():
        table.add_row(cat, str(c["tasks"]), str(c["active"]), f"{c['mastered']}/{c['impossible']}",
                      f"{c['trials']:.0f}", f"{c['pooled_mean']:.3f}",
                      "-" if c["active_mean"] is None else f"{c['active_mean']:.3f}")
    return table


def plot_pool(pool, path: Path, title: str) -> Path:
    """Bar chart: pooled posterior mean success per category, +- one posterior std, task counts."""
    plt = pyplot_agg()
    stats = pool.category_stats()
    a0, b0 = pool.config.prior
    cats = list(stats)
    means, errs = [], []
    for c in stats.values():
        a, b = a0 + c["successes"], b0 + c["trials"] - c["successes"]
        means.append(a / (a + b))
        errs.append((a * b / ((a + b) ** 2 * (a + b + 1))) ** 0.5)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(cats) + 1.5))
    ax.barh(range(len(cats)), means, xerr=errs, color="#4c78a8", ecolor="#333333", capsize=2)
    ax.set_yticks(range(len(cats)))
    ax.set_yticklabels([f"{c} ({stats[c]['tasks']})" for c in cats], fontsize=8)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("estimated success (posterior mean ± std)")
    ax.set_ylabel("category (tasks in pool)")
    ax.set_title(title)
    return save_figure(fig, path, dpi=120)


def register(app: typer.Typer) -> None:
    tasks_app = typer.Typer(no_args_is_help=True, help="Task splits, the self-evolving task generator, task pools.")
    app.add_typer(tasks_app, name="tasks")

    @tasks_app.command("list")
    def list_command(
        env: str = typer.Argument(..., help="environment id, e.g. agentgym/Household-v0"),
        split: str = typer.Option("train", help="train | heldout | heldout_unseen"),
        limit: int = typer.Option(20, help="show the first N tasks (0: all)"),
        category: Optional[str] = typer.Option(None, help="only tasks of this category"),
    ):
        """List the tasks of a split with their ids and categories."""
        import agentgym  # lazy: `agentgym --help` stays fast

        env_id = agentgym.registration.check_env_id(env)
        space = agentgym.get_task_space(env_id)
        tasks = space.split(split)
        if category is not None:
            tasks = [t for t in tasks if space.category(t) == category]
        shown = tasks[:limit] if limit else tasks
        table = Table(title=f"{env_id} {split}: {len(tasks)} tasks" + (f" in {category}" if category else ""))
        for col in ("task_id", "category", "seed", "params"):
            table.add_column(col)
        for t in shown:
            table.add_row(t.task_id, space.category(t), str(t.seed), _fmt_params(dict(t.params)))
        console.print(table)

    @tasks_app.command("evolve")
    def evolve_command(
        env: str = typer.Argument(..., help="environment id"),
        rounds: int = typer.Option(10, help="generator rounds (each: propose, roll out, update)"),
        policy: str = typer.Option("random", help="random | oracle | hf:PATH: who plays the rollouts"),
        out: Path = typer.Option(Path("pool.json"), help="write the pool (tasks, posteriors, stats) here"),
        curriculum: str = typer.Option("learnability", help="uniform | learnability | sec | dump"),
        tasks_per_round: int = typer.Option(8, help="tasks played per round"),
        group_size: int = typer.Option(4, help="episodes per task"),
        new_per_round: int = typer.Option(8, help="new tasks proposed per round"),
        seed_tasks: int = typer.Option(32, help="train-split tasks the pool starts from"),
        min_active: int = typer.Option(16, help="keep at least this many active tasks"),
        llm: Optional[str] = typer.Option(None, help="hf:PATH of an LLM that also proposes tasks in words"),
        seed: int = typer.Option(0),
        device: str = typer.Option("auto", help="hf: device: auto | cpu | cuda"),
    ):
        """Run the self-evolving task generator with rollouts of a policy; write the pool as JSON."""
        import agentgym  # lazy: `agentgym --help` stays fast
        from agentgym.errors import ConfigError
        from agentgym.output_folders import prepare_output_file
        from agentgym.policies.base import SamplingParams
        from agentgym.tasks.source import make_task_source
        from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
        from agentgym.evaluation.cli import load_policy, parse_policy_spec

        env_id = agentgym.registration.check_env_id(env)
        if rounds < 1 or tasks_per_round < 1 or group_size < 1:
            raise ConfigError("--rounds, --tasks-per-round and --group-size must be >= 1")
        prepare_output_file(out, "--out file", "pass --out a file in a folder you can write")
        space = agentgym.get_task_space(env_id)
        player = load_policy(parse_policy_spec(policy), env_id, seed=seed, device=device, task_space=space)
        proposer = None
        generator_opts: dict = {}
        if llm is not None:
            spec = parse_policy_spec(llm)
            if not spec.is_llm:
                raise ConfigError(f"--llm must name an LLM policy (hf:PATH or openai:URL:MODEL), got {llm!r}")
            proposer = load_policy(spec, env_id, seed=seed, device=device)
            generator_opts["weights"] = {"sample": 1.0, "mutate": 2.0, "easier": 1.0, "harder": 0.5, "llm": 1.0}
        source = make_task_source("evolve", space, space.split("train"), curriculum=curriculum, seed=seed,
                                  seed_tasks=seed_tasks, new_per_round=new_per_round, min_active=min_active,
                                  llm=proposer, generator=generator_opts)
        est = EstimatorConfig(name="rloo" if group_size > 1 else "grpo", outcome="success")
        history = []
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            bar = progress.add_task(f"evolving {env_id} tasks with {policy}", total=rounds)
            for r in range(rounds):
                tasks = source.next_tasks(tasks_per_round)
                trajs = agentgym.collect(env_id, tasks, player, group_size=group_size, seed=seed * 100_003 + r,
                                         sampling=SamplingParams(temperature=1.0, seed=seed + r))
                advantages = (compute_advantages(trajs, est) if group_size > 1
                              else [[0.0] * len(t.steps) for t in trajs])
                metrics = source.update(trajs, advantages)
                live = [t for t in trajs if not t.infra_error]
                history.append({"round": r + 1, "success_rate": sum(t.success for t in live) / max(len(live), 1),
                                **{k: v for k, v in metrics.items() if k != "round"},
                                **source.pool.summary()})
                progress.update(bar, completed=r + 1)
        gen_stats = dict(source.generator.stats)
        source.pool.save(out, extra={"env_id": env_id, "policy": policy, "curriculum": curriculum,
                                     "generator_stats": gen_stats, "history": history})
        console.print(pool_table(source.pool, f"{env_id} task pool after {rounds} rounds ({policy})"))
        rejected = {k.split("/", 1)[1]: v for k, v in gen_stats.items() if k.startswith("rejected/")}
        admitted = {k.split("/", 1)[1]: v for k, v in gen_stats.items() if k.startswith("admitted/")}
        console.print(f"admitted by source: {admitted}; rejected: {rejected or 'none'}")
        console.print(f"pool written to {out}")

    @tasks_app.command("stats")
    def stats_command(
        pool_file: Path = typer.Argument(..., help="a pool JSON written by `agentgym tasks evolve`"),
        png: Optional[Path] = typer.Option(None, help="bar chart path (default: next to the pool file)"),
    ):
        """Show a task pool by category: tasks, retirements, rollouts and success estimates."""
        from agentgym.tasks.pool import TaskPool, read_pool_file  # lazy: `agentgym --help` stays fast

        meta = read_pool_file(pool_file)  # read once: the pool and its header (env_id, generator_stats)
        pool = TaskPool.from_file_state(meta, pool_file)
        title = f"{meta.get('env_id', 'task pool')} ({pool_file.name})"
        console.print(pool_table(pool, title))
        summary = pool.summary()
        origins: dict[str, int] = {}
        for e in pool.entries.values():
            origins[e.origin] = origins.get(e.origin, 0) + 1
        console.print(f"{summary['tasks']} tasks: {summary['active']} active, {summary['mastered']} mastered, "
                      f"{summary['impossible']} impossible; by origin {origins}")
        if meta.get("generator_stats"):
            rejected = {k.split("/", 1)[1]: v for k, v in meta["generator_stats"].items() if k.startswith("rejected/")}
            console.print(f"proposals rejected: {rejected or 'none'}")
        if png is None and not can_plot():  # a chart asked for by --png still needs matplotlib (one line)
            console.print(f"chart not drawn: {NO_MATPLOTLIB}", highlight=False, soft_wrap=True)
            return
        path = plot_pool(pool, png or pool_file.with_suffix(".png"), title)
        console.print(f"plot written to {path}")
