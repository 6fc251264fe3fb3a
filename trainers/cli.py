"""`agentgym train` and `agentgym sft`: registered on the main CLI by `register(app)`.

No torch import at module level: `agentgym --help` stays fast and works without the extra.
"""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from agentgym.errors import ConfigError
from agentgym.progress import output_console

console = output_console()

CONFIG_HELP = "a preset name (e.g. household-tiny, generic) or a YAML config file"
OVERRIDES_HELP = "dotted key=value overrides, e.g. estimator.name=grpo ppo.lr=1e-4 rollout.group_size=4"


def _load(config: Optional[str], overrides: Optional[List[str]], run_dir: Optional[str],
          imports: Optional[List[str]] = None, env: Optional[str] = None, log=None):
    from agentgym.trainers.config import load_config
    from agentgym.registration import import_modules
    from agentgym.trainers.env_requirements import config_for_env

    import_modules(imports)  # before the config is read: its env.id may be registered by them
    extra = list(overrides or [])
    if run_dir:
        extra.append(f"run_dir={run_dir}")
    if env:
        cfg = config_for_env(env, config or "generic", extra, log=log or _note)
    elif config is None:
        raise ConfigError("name a preset or config file (e.g. household-tiny), or an env to train with "
                          "--env ENV_ID (e.g. --env agentgym/Household-v0)")
    else:
        cfg = load_config(config, extra)
        _note_foreign_env_settings(config, cfg.env, log or _note)
    # recorded only: --import's modules were imported above, the config's own by load_config
    cfg.imports = list(dict.fromkeys([*cfg.imports, *(imports or [])]))
    return cfg


def _note_foreign_env_settings(config: str, env_cfg, log) -> None:
    """`household-tiny env.id=OTHER`: the preset's env settings (a step limit, say) still apply to
    OTHER; say so, and that --env leaves them out."""
    from agentgym.trainers.config import _read_yaml

    section = _read_yaml(config).get("env") or {}
    if section.get("id") and section["id"] != env_cfg.id and section.get("env_kwargs") == env_cfg.env_kwargs \
            and env_cfg.env_kwargs:
        log(f"note: env.env_kwargs={env_cfg.env_kwargs} are {config}'s settings for {section['id']}, applied to "
            f"{env_cfg.id}; `agentgym train {config} --env {env_cfg.id}` leaves them out")


def _note(line: str) -> None:
    """A line about how the config was made: on stderr, so --print-config's YAML stays clean."""
    Console(stderr=True, soft_wrap=True).print(line, markup=False, highlight=False)


def _split_config(config: Optional[str], overrides: Optional[List[str]]) -> tuple[Optional[str], list[str]]:
    """`agentgym train --env X iterations=2`: the first override lands in CONFIG's slot."""
    overrides = list(overrides or [])
    if config is not None and "=" in config and not Path(config).exists():
        return None, [config, *overrides]
    return config, overrides


def check_before_building(policy_cfg) -> None:
    """The device and the given model, in one line each, before any env, model or process starts."""
    from agentgym.policies.model_files import check_device, check_model_path

    check_device(policy_cfg.device)
    if policy_cfg.model:
        check_model_path(policy_cfg.model, what="policy.model")


# Settings whose package is imported only when the run reaches it (a rollout engine starts after the
# warm start is built): checked before anything is built, in one line naming the extra.
SETTING_EXTRAS = (("policy.engine", "vllm", "vllm", "vllm"), ("policy.engine", "ray", "ray", "ray"),
                  ("env.executor", "ray", "ray", "ray"))


def check_setting_extras(cfg) -> None:
    import importlib.util

    from agentgym.errors import MissingExtraError, install_hint

    for setting, value, module, extra in SETTING_EXTRAS:
        section, name = setting.split(".")
        if getattr(getattr(cfg, section), name, None) != value:
            continue
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtraError(f"{setting}={value} needs {module}, which is not installed: run "
                                    f"`{install_hint(extra)}`")


def resume_hint(cfg, argv: list[str]) -> str:
    """The line a stopped run ends with: its last checkpoint and the command that continues it."""
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.run_setup import run_dir_for

    run_dir = run_dir_for(cfg)
    args = [a for a in argv if a not in ("--resume", "--overwrite")]
    if "--run-dir" not in args:
        args += ["--run-dir", str(run_dir)]
    command = shlex.join(["agentgym", "train", *args, "--resume"])
    from agentgym.trainers.checkpoint import CheckpointError

    try:
        checkpoint = latest_checkpoint(run_dir)
    except CheckpointError as exc:
        return f"interrupted; no checkpoint to continue from: {exc}"
    if checkpoint is None:
        return (f"interrupted before the first checkpoint (checkpoint_every={cfg.checkpoint_every}); "
                f"`{shlex.join(['agentgym', 'train', *args, '--overwrite'])}` starts again")
    return f"interrupted; last checkpoint {checkpoint}; continue with: {command}"


def _summary_table(summary: dict) -> Table:
    table = Table(title=f"held-out success ({summary['run_dir']})")
    table.add_column("iteration", justify="right")
    table.add_column("success rate", justify="right")
    for row in summary["evals"]:
        table.add_row(str(row["iteration"]), f"{row['success_rate']:.3f}")
    return table


def train_command(
    config: Optional[str] = typer.Argument(None, help=CONFIG_HELP + "; optional with --env"),
    overrides: Optional[List[str]] = typer.Argument(None, help=OVERRIDES_HELP),
    run_dir: Optional[str] = typer.Option(None, "--run-dir", help="where checkpoints and metrics go (default runs/<name>)"),
    resume: bool = typer.Option(False, "--resume", help="continue from the run dir's latest checkpoint"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace the earlier run in the run dir (without it, "
                                   "a run dir holding a run is refused)"),
    nproc: int = typer.Option(1, "--nproc", help="data-parallel processes on this machine (runs torchrun; "
                              "gloo on CPU, nccl on CUDA); see docs/scaling.md"),
    imports: Optional[List[str]] = typer.Option(None, "--import", help="a module to import first (it registers your env); repeatable"),
    print_config: bool = typer.Option(False, "--print-config", help="print the resolved config (YAML) and exit"),
    env: Optional[str] = typer.Option(None, "--env", help="train this registered env (yours too, with --import): "
                                      "the generic preset (or CONFIG) fitted to what its task space provides"),
):
    """Train an LLM agent with RL (GiGPO, SPA, LOOP, GRPO, RLOO, PPO) from a preset or config file.

    Collect, advantages, PPO-clip update, held-out eval, checkpoints. `agentgym train household-tiny`
    is the CPU main job; `agentgym train --env mypkg/MyEnv-v0 --import mypkg` trains your own env.

    Ctrl-C stops with exit status 130 and one line naming the last checkpoint and the --resume command."""
    from agentgym import progress

    # called as a plain function (tests, scripts): a typer OptionInfo default means "not given"
    nproc = nproc if isinstance(nproc, int) else 1
    imports = imports if isinstance(imports, list) else None
    env = env if isinstance(env, str) else None
    run_dir = run_dir if isinstance(run_dir, str) else None
    resume = resume is True
    overwrite = overwrite is True
    config, overrides = _split_config(config, overrides)
    cfg = _load(config, overrides, run_dir, imports, env)
    check_before_building(cfg.policy)
    check_setting_extras(cfg)
    if print_config is True:  # `is True`: called as a plain function, the default is typer's OptionInfo
        import yaml  # before torch: the config prints where the train extra is not installed yet

        print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
        return
    # torch from here on: a config error above is one line within a second
    from agentgym.trainers.distributed import check_world, launch, world_from_env
    from agentgym.trainers.run_setup import run_dir_for

    if resume:
        from agentgym.trainers.checkpoint import check_resume

        # a broken checkpoint or changed settings: one line before anything starts or is removed
        check_resume(run_dir_for(cfg), cfg.to_dict())
        from agentgym.trainers.run_setup import finished_line, finished_run

        if (done := finished_run(run_dir_for(cfg), cfg.iterations)) is not None:  # left byte for byte as it is
            output_console().print(finished_line(run_dir_for(cfg), done), markup=False, highlight=False,
                                   soft_wrap=True)
            return
    if not resume and not overwrite:
        from agentgym.trainers.run_setup import previous_run, refuse_to_replace

        refuse_to_replace(run_dir_for(cfg), previous_run(run_dir_for(cfg)))  # before torchrun or a model build
    if nproc > 1:  # check here too, so a bad world size is one line before torchrun starts anything
        check_world(cfg, nproc)
        args = _argv(config, overrides, run_dir, imports, env) + (["--resume"] if resume else []) \
            + (["--overwrite"] if overwrite else [])
        sys.exit(launch(nproc, args))
    from agentgym.trainers.training import heldout_change, train  # torch: once the config and the extras it names are checked

    global console
    quiet_rank = world_from_env()[0] > 0
    if quiet_rank:
        console = output_console(quiet=True)  # only rank 0 prints
    console.print(f"[bold]agentgym train[/] {cfg.name}: estimator={cfg.estimator.name} env={cfg.env.id} "
                  f"run_dir={run_dir_for(cfg)}")
    with progress.session(mode="off" if quiet_rank else None) as session, \
            progress.bar("RL", total=cfg.iterations, unit="iterations", every=None, session=session) as bar:

        def on_iteration(m: dict) -> None:
            ev = f" held-out {m['eval']['success_rate']:.3f}" if "eval" in m else ""
            bar.update(m["iteration"], item_seconds=m["time"]["iteration_s"])
            bar.line(f"train success {m['rollout']['success_rate']:.3f}  invalid {m['rollout']['invalid_rate']:.2f}  "
                     f"|A| {m['adv']['abs_mean']:.3f}  pg {m['train'].get('pg_loss', 0.0):+.4f}  "
                     f"{m['time']['iteration_s']:.1f}s{ev}")

        with _interruptible() as interrupted:
            try:
                summary = train(cfg, resume=resume, log=session.log, on_iteration=on_iteration, session=session,
                                overwrite=overwrite)
            except KeyboardInterrupt:
                interrupted.append(True)
    if interrupted:  # also when a library below caught the KeyboardInterrupt and returned
        console.print(resume_hint(cfg, _argv(config, overrides, run_dir, imports, env)), markup=False,
                      highlight=False, soft_wrap=True)
        sys.exit(130)
    if "evals" not in summary:  # a data-parallel rank other than 0
        return
    console.print(_summary_table(summary))
    console.print(f"held-out success {heldout_change(summary)} over {summary['heldout_tasks']} tasks x "
                  f"{summary['episodes_per_task']} in {summary['wall_seconds']:.0f}s; metrics: "
                  f"{summary['run_dir']}/metrics.jsonl")
    if summary.get("stopped_early"):
        # the last line a user sees: this run is not the configured experiment
        console.print(f"[bold red]STOPPED EARLY:[/] {summary['stopped_early']}")


def _argv(config, overrides, run_dir, imports, env) -> list[str]:
    """The train command's arguments again (torchrun's ranks, the --resume hint)."""
    args = ([config] if config else []) + list(overrides or []) + (["--env", env] if env else [])
    args += (["--run-dir", run_dir] if run_dir else [])
    return args + [flag for module in imports or [] for flag in ("--import", module)]


class _interruptible:
    """Records a Ctrl-C even if code below swallows the KeyboardInterrupt it raises (then the run
    would end with status 0 as if it had finished)."""

    def __enter__(self) -> list:
        self.flag: list = []
        self.old = None
        try:
            def on_sigint(signum, frame):
                self.flag.append(True)
                raise KeyboardInterrupt

            self.old = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main thread: no handler, the KeyboardInterrupt alone counts
            pass
        return self.flag

    def __exit__(self, *exc) -> bool:
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False


def sft_command(
    config: str = typer.Argument(..., help=CONFIG_HELP),
    overrides: Optional[List[str]] = typer.Argument(None, help=OVERRIDES_HELP),
    run_dir: Optional[str] = typer.Option(None, "--run-dir", help="output folder (default runs/<name>)"),
):
    """Behaviour cloning on oracle trajectories: the RL warm start, saved as <run_dir>/sft_model.

    Reports the model's held-out success when it is done."""
    from agentgym import progress
    from agentgym.registration import get_task_space
    from agentgym.trainers.config import save_config

    cfg = _load(config, list(overrides or []) + ["sft.enabled=true"], run_dir)
    check_before_building(cfg.policy)
    # torch from here on: a config error above is one line within a second
    from agentgym.trainers.training import evaluate_policy
    from agentgym.trainers.run_setup import make_engine, make_policy, prepare_start_model, quiet_transformers
    from agentgym.trainers.run_setup import prepare_run_dir, run_dir_for
    from agentgym.trainers.task_selection import write_eval_tasks
    from agentgym.policies.engines import EngineSettings
    from agentgym.trainers.threads import set_torch_threads

    quiet_transformers()
    out = run_dir_for(cfg)
    prepare_run_dir(out)  # a writable folder with no link in it, or one line
    with progress.session() as session:
        cfg.torch_threads = set_torch_threads(cfg.torch_threads, session.log)
        # as `agentgym train` does: `agentgym eval RUN/sft_model` then reads the chat layout it was trained with
        save_config(cfg, out / "config.yaml")
        model_dir, info = prepare_start_model(cfg, out, log=session.log, session=session)
        eval_path = write_eval_tasks(cfg.eval, cfg.env, get_task_space(cfg.env.id), out)
        policy = make_policy(cfg.policy, model_dir)
        # policy.engine: generate as the trainer would
        engine = make_engine(EngineSettings(cfg.policy, cfg.seed, cfg.ray), policy, model_dir)
        try:
            ev = evaluate_policy(cfg.eval, cfg.env, engine, eval_path, cfg.seed,
                                 rollout=cfg.rollout, session=session)
        finally:
            engine.close()
    console.print(f"SFT model: {model_dir}  held-out success {ev['success_rate']:.3f} "
                  f"(invalid-action rate {ev['invalid_action_rate']:.3f})")


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("sft")(sft_command)


if __name__ == "__main__":  # `torchrun --nproc-per-node N -m agentgym.trainers.cli train CONFIG [overrides]`
    from agentgym.cli import main
    from agentgym.trainers.distributed import exit_rank

    try:
        main()
        code = 0
    except SystemExit as stop:  # typer ends with sys.exit; a message is printed as Python would
        if stop.code is not None and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    exit_rank(code)
