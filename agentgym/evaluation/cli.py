"""`agentgym eval` and `agentgym eval-compare`: held-out evaluation from the command line.

    agentgym eval agentgym/Household-v0 --policy oracle --split heldout --episodes 4 --out runs/eval/oracle
    agentgym eval agentgym/Household-v0 --policy hf:runs/household-tiny/final_model --limit 50
    agentgym eval runs/household-tiny          # a run's final model, evaluated as the trainer did
    agentgym eval --preset household-smol      # a catalog model, in the layout its preset trains it with
    agentgym eval agentgym/Household-v0 --policy openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct
    agentgym eval-compare runs/eval/warm runs/eval/trained --out runs/eval/compare

Policy specs: `random`, `oracle`, `hf:PATH` (a local HF folder or cached hub id; torch is imported
only then), `openai:URL:MODEL` (any OpenAI-compatible server). User errors raise AgentGymError,
which the `agentgym` entry point prints as one line.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Optional

import typer

from agentgym.errors import ConfigError
from agentgym.figures import NO_MATPLOTLIB, can_plot
from agentgym.output_folders import prepare_output_folder
from agentgym.policies.specs import POLICY_HELP, PolicySpec, resolve_device, load_policy, parse_policy_spec  # noqa: F401

def training_settings(model_path: str) -> dict[str, Any]:
    """The chat layout and token budget a model was trained with, from the config.yaml that
    `agentgym train` writes in the run folder (the model folder or one of its parents).

    Evaluating with another history window or action format than training measures the
    prompt mismatch, not the agent, so these become the defaults of `agentgym eval`."""
    path = Path(model_path).expanduser()
    if not path.exists():
        return {}
    for folder in [path, *list(path.resolve().parents)[:3]]:
        config = folder / "config.yaml"
        if config.is_file():
            try:
                import yaml

                data = yaml.safe_load(config.read_text()) or {}
            except Exception:
                return {}
            env = data.get("env") if isinstance(data, dict) else None
            if not isinstance(env, dict) or "chat" not in env:
                continue  # a transformers config.yaml, or something else: keep looking up
            rollout = data.get("rollout") or {}
            return {"chat": dict(env.get("chat") or {}), "max_new_tokens": rollout.get("max_new_tokens"),
                    "admissible_only": rollout.get("admissible_only") is True, "source": str(config)}
    return {}


def preset_settings(preset: str) -> dict[str, Any]:
    """What a training preset (or config file) prompts and plays with: its env, chat layout, token
    budget, decoding, episode settings, task filter and model. `agentgym eval --preset NAME` takes
    these, so a model is evaluated in the layout that preset trains it with rather than eval's
    defaults (a catalog model never trained on those answers in a format they do not parse)."""
    from agentgym.trainers.config import load_config

    cfg = load_config(preset)
    return {"env_id": cfg.env.id, "chat": _changed(cfg.env.chat), "max_new_tokens": cfg.rollout.max_new_tokens,
            "admissible_only": bool(cfg.rollout.admissible_only), "env_kwargs": dict(cfg.env.env_kwargs or {}),
            "categories": list(cfg.env.categories or []), "task_filter": dict(cfg.env.task_filter or {}),
            "model": cfg.policy.model or None, "max_prompt_tokens": cfg.policy.max_prompt_tokens,
            "dtype": cfg.policy.dtype, "name": Path(preset).stem}


def _changed(chat) -> dict[str, Any]:
    """A ChatConfig's settings that differ from ChatEnv's defaults (what a preset chose)."""
    import dataclasses

    from agentgym.chat import ChatConfig

    default = ChatConfig()
    return {f.name: getattr(chat, f.name) for f in dataclasses.fields(chat)
            if getattr(chat, f.name) != getattr(default, f.name)}


def describe_layout(chat: dict, env_id: str, max_new_tokens: int, admissible_only: bool,
                    env_kwargs: dict | None) -> str:
    """The prompt layout and reply budget an LLM is evaluated with, in words."""
    from agentgym.chat import ChatConfig

    config = ChatConfig.of(chat)
    parser = config.parser or f"{env_id}'s own action format"
    steps = (env_kwargs or {}).get("max_episode_steps")
    return (f"parser {parser}, history {config.history}, {max_new_tokens} tokens per reply, "
            + ("admissible-only decoding (each reply one of the listed actions)" if admissible_only
               else "free replies")
            + (f", {steps} steps per episode" if steps else ""))


def presets_for(model: str) -> list[str]:
    """The training presets that train `model` (a catalog name or path, as policy.model names it)."""
    import yaml

    from agentgym.trainers.config import PRESET_DIR

    names = []
    for path in sorted(PRESET_DIR.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and (data.get("policy") or {}).get("model") == model:
            names.append(path.stem)
    return names


def preset_tasks(settings: dict, split: str, space, folder: Path) -> str:
    """The split filtered by the preset's env.task_filter / env.categories (as its training run
    evaluates), written as a task file in `folder`; the split itself when the preset filters nothing."""
    from agentgym.tasks.splits import save_split
    from agentgym.trainers.task_selection import filter_tasks

    if not (settings["categories"] or settings["task_filter"]) or split.endswith(".jsonl") or Path(split).is_file():
        return split
    if split not in space.split_names:
        return split  # resolve() names the bad split
    tasks = filter_tasks(space.split(split), settings["task_filter"], settings["categories"], space)
    if not tasks:
        raise ConfigError(f"no {split} tasks match preset {settings['name']}'s env.categories "
                          f"{settings['categories']}: pass --split with a task file")
    path = folder / f"{split}-{settings['name']}.jsonl"
    save_split(path, tasks)
    return str(path)


def layout_lines(spec: PolicySpec, env_id: str, chat: dict, sampling, env_kwargs: dict | None, layout: dict,
                 from_training: bool) -> list[str]:
    """What `agentgym eval` says about the layout an LLM is prompted in and whence it came: a model
    answers in the layout it learned, and eval's defaults are no model's (rich markup)."""
    if not spec.is_llm:
        return []
    words = describe_layout(chat, env_id, sampling.max_new_tokens, sampling.admissible_only, env_kwargs)
    if layout:
        lines = [f"chat layout of preset {layout['name']}: {words}"]
        if layout["model"] and spec.target != layout["model"]:
            lines.append(f"[yellow]note:[/yellow] preset {layout['name']} trains {layout['model']}, not "
                         f"{spec.target}: this model may not follow its layout")
        return lines
    if from_training:
        return []  # the run's or model folder's own layout, said where it is read
    known = presets_for(spec.target)
    return [f"chat layout: eval's defaults ({words}), as no training run or preset names one for {spec.target}",
            "[yellow]note:[/yellow] a model never trained in this layout may answer in another format (replies "
            "unparsed, a high invalid-action rate): "
            + (f"--preset {known[0]} evaluates it in the layout that preset trains it with" if known else
               "--preset NAME takes a training preset's layout; --history, --max-new-tokens and --admissible-only "
               "set it by hand")]


RUN_HELP = ("a training run's folder (`agentgym train`'s run dir): its env, held-out tasks, chat layout, "
            "sampling, episode settings and final model, so the figure matches its summary.json")


def is_run_dir(path: str | Path | None) -> bool:
    return path is not None and (Path(path).expanduser() / "config.yaml").is_file() and \
        bool(training_settings(str(Path(path).expanduser())))


def run_settings(run_dir: str | Path) -> dict[str, Any]:
    """How `agentgym train` evaluated this run (trainers/training.py, evaluate_policy), read from the
    config.yaml and eval_<split>.jsonl it wrote: evaluating with these reproduces its figures."""
    import yaml

    root = Path(run_dir).expanduser()
    try:
        cfg = yaml.safe_load((root / "config.yaml").read_text()) or {}
        env, ev, rollout, pol = cfg["env"], cfg["eval"], cfg.get("rollout") or {}, cfg.get("policy") or {}
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        raise ConfigError(f"{root} is not an `agentgym train` run folder (no readable config.yaml with env and "
                          "eval sections)") from None
    tasks = root / f"eval_{ev.get('split', 'heldout')}.jsonl"
    if not tasks.is_file():
        raise ConfigError(f"{root} has no {tasks.name} (the held-out tasks the trainer writes before its first "
                          "evaluation): the run never started; pass an env id and --split instead")
    model, note = root / "final_model", ""
    if not (model / "config.json").is_file() and not (model / "adapter_config.json").is_file():
        pointer = root / "checkpoints" / "latest"
        latest = pointer.parent / pointer.read_text().strip() / "model" if pointer.is_file() else None
        if latest is None or not latest.is_dir():
            raise ConfigError(f"{root} has no final_model and no checkpoint yet: pass --policy hf:PATH to evaluate "
                              "another model on its tasks")
        model, note = latest, f"the run has no final_model: evaluating its latest checkpoint ({latest.parent.name})"
    summary = {}
    if (root / "summary.json").is_file():
        import json

        try:
            summary = json.loads((root / "summary.json").read_text())
        except (ValueError, RecursionError):  # a summary that does not parse only loses its figures
            summary = {}
    return {"env_id": env["id"], "tasks": str(tasks), "episodes": int(ev.get("episodes_per_task", 1)),
            "temperature": float(ev.get("temperature", 0.0)),
            "max_new_tokens": ev.get("max_new_tokens") or rollout.get("max_new_tokens"),
            "admissible_only": rollout.get("admissible_only") is True,
            "chat": dict(env.get("chat") or {}), "env_kwargs": dict(env.get("env_kwargs") or {}),
            "seed": int(cfg.get("seed", 0)), "imports": list(cfg.get("imports") or []), "model": str(model),
            "note": note, "dtype": pol.get("dtype"), "max_prompt_tokens": pol.get("max_prompt_tokens"),
            "device": pol.get("device", "cpu"), "engine": pol.get("engine") or "hf",
            # the figure this evaluation reproduces: the run's final evaluation, of final_model's weights
            "expected": summary.get("heldout_success_after") if not note else None}


def _history(value: str | None) -> int | str | None:
    if value is None:
        return None
    if value == "full":
        return "full"
    try:
        k = int(value)
    except ValueError:
        raise ConfigError(f"--history must be a number of past turns or 'full', got {value!r}") from None
    if k < 0:
        raise ConfigError(f"--history must be >= 0, got {k}")
    return k


def _summary_table(result, title: str):
    from rich.table import Table

    from agentgym.evaluation.evaluate import METRIC_NAMES  # lazy: `agentgym --help` stays fast
    from agentgym.evaluation.report import LABELS

    conf = int(round(100 * result.overall.success_rate.confidence))
    table = Table(title=title, caption=(f"{result.num_tasks} tasks, {result.overall.episodes} episodes scored, "
                                        f"{result.infra_errors} infra error(s) excluded, {result.wall_seconds:.1f} s"))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column(f"{conf}% CI", justify="right")
    table.add_column("n", justify="right")

    def add(name: str, est, unit: str) -> None:
        if est.n == 0:
            table.add_row(name, "n/a", "n/a", f"0 {unit}")
        else:
            table.add_row(name, f"{est.value:.3f}", f"[{est.low:.3f}, {est.high:.3f}]", f"{est.n} {unit}")

    for name in METRIC_NAMES:
        add(LABELS[name], getattr(result.overall, name), "steps" if name == "invalid_action_rate" else "episodes")
    for k, est in result.pass_at_k.items():
        add(f"pass@{k}", est, "tasks")
    return table


#: With more categories than this, the terminal shows each part of "a/b" categories instead.
MAX_SHOWN_CATEGORIES = 12


def _category_tables(result) -> list:
    from rich.table import Table

    if len(result.categories) > MAX_SHOWN_CATEGORIES and result.category_parts:
        sections = [(f"by category part {i} of {len(result.category_parts)}", part)
                    for i, part in enumerate(result.category_parts, 1)]
    else:
        sections = [("by category", result.categories)]
    tables = []
    for title, groups in sections:
        table = Table(title=title)
        table.add_column("category", no_wrap=True)
        for col in ("tasks", "eps", "success", "95% CI", "score"):
            table.add_column(col, justify="right", no_wrap=True)
        for name, m in groups.items():
            sr = m.success_rate
            ci = f"[{sr.low:.2f}, {sr.high:.2f}]" if sr.n else "n/a"
            table.add_row(name, str(m.tasks), str(m.episodes), f"{sr.value:.3f}" if sr.n else "n/a", ci,
                          f"{m.mean_score.value:.3f}" if m.mean_score.n else "n/a")
        tables.append(table)
    return tables


def register(app: typer.Typer) -> None:
    """Add `eval` and `eval-compare` to the agentgym CLI."""

    @app.command("eval")
    def eval_command(
        env: Optional[str] = typer.Argument(None, help="environment id, e.g. agentgym/Household-v0, or a training "
                                            "run's folder (RUN_DIR): then every setting comes from the run"),
        policy: Optional[str] = typer.Option(None, "--policy", "-p",
                                             help=POLICY_HELP + " (default: random; with a run, its final model)"),
        from_run: Optional[Path] = typer.Option(None, "--from-run", help=RUN_HELP),
        split: Optional[str] = typer.Option(None, "--split", "-s",
                                            help="heldout | heldout_unseen | train, or a JSONL file of TaskSpecs "
                                            "(default: heldout; with a run, its held-out tasks)"),
        episodes: Optional[int] = typer.Option(None, "--episodes", "-k",
                                               help="episodes per task (pass@k for k up to this; default 1, with a "
                                               "run its eval.episodes_per_task)"),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help="evaluate only the first N tasks"),
        out: Optional[Path] = typer.Option(None, "--out", "-o",
                                           help="write report.json, report.md, report.png and trajectories.jsonl here"),
        seed: Optional[int] = typer.Option(None, help="reset seed of the first task (task i uses seed+i); also the "
                                           "sampling seed (default 0; with a run, its seed)"),
        temperature: Optional[float] = typer.Option(
            None, help="LLM sampling temperature (default: 0 = greedy with --episodes 1, else 1.0; with a run, its "
            "eval.temperature)"),
        top_p: float = typer.Option(1.0, help="LLM nucleus sampling"),
        max_new_tokens: Optional[int] = typer.Option(
            None, help="LLM tokens per turn (default: the training run's, else 64)"),
        history: Optional[str] = typer.Option(
            None, help="past turns shown in each prompt, or 'full' (default: the training run's, else 2)"),
        admissible_only: Optional[bool] = typer.Option(
            None, "--admissible-only/--free-replies", help="hf: decode only the env's admissible actions "
            "(default: as the training run did, rollout.admissible_only; else free)"),
        device: str = typer.Option("auto", help="hf: device: auto | cpu | cuda | cuda:N"),
        executor: str = typer.Option("inprocess", help="inprocess | threads | process | a registered executor"),
        workers: int = typer.Option(2, help="threads / worker processes for --executor threads / process"),
        confidence: float = typer.Option(0.95, help="confidence level of the intervals"),
        save_trajectories: bool = typer.Option(True, help="with --out, also save every trajectory"),
        imports: Optional[list[str]] = typer.Option(None, "--import", help="a module to import first (it registers "
                                                    "your env); repeatable"),
        preset: Optional[str] = typer.Option(
            None, "--preset", help="evaluate in a training preset's layout (or a config file's): its env, chat "
            "layout, reply budget, admissible-only decoding, episode length and task categories, and its model "
            "unless --policy names one; e.g. --preset household-smol (smollm2-135m-instruct)"),
    ):
        """Evaluate a policy on held-out tasks: success rate, score, steps, invalid actions, pass@k, CIs.

        `agentgym eval RUN_DIR` (or `--from-run RUN_DIR`) evaluates a training run's final model the
        way the trainer did (its env, tasks, chat layout, sampling, episodes and seed), so the
        figure matches the run's summary.json; any option given overrides the run's setting."""
        import dataclasses

        import agentgym  # noqa: F401  registers the built-in envs
        from agentgym import progress  # lazy: `agentgym --help` stays fast
        from agentgym.policies.base import SamplingParams
        from agentgym.policies.engines import generates_with_trainer_model
        from agentgym.registration import check_env_id, get_task_space, import_modules
        from agentgym.evaluation.evaluate import EvalRequest, run_eval
        from agentgym.evaluation.report import write_report
        from agentgym.evaluation.stats import power_warning

        console = progress.output_console()
        if from_run is None and is_run_dir(env):
            from_run, env = Path(str(env)), None
        run = run_settings(from_run) if from_run is not None else {}
        if run and preset is not None:
            raise ConfigError("a training run's folder brings its own layout: give the run or --preset, not both")
        import_modules(imports, "--import")
        layout = preset_settings(preset) if preset is not None else {}
        if layout:
            if env is not None and check_env_id(env) != check_env_id(layout["env_id"]):
                raise ConfigError(f"preset {preset} trains on {layout['env_id']}, not {env}: leave the env id out")
            env = layout["env_id"]
            policy = policy or (f"hf:{layout['model']}" if layout["model"] else None)
            max_new_tokens = max_new_tokens or layout["max_new_tokens"]
        if run:
            import_modules(run["imports"], f"the module that registered {from_run}'s env")
            if env is not None and check_env_id(env) != check_env_id(run["env_id"]):
                raise ConfigError(f"{from_run} trained {run['env_id']}, not {env}: leave the env id out")
            env = run["env_id"]
            policy = policy or f"hf:{run['model']}"
            split = split or run["tasks"]
            episodes = episodes if episodes is not None else run["episodes"]
            seed = seed if seed is not None else run["seed"]
            temperature = temperature if temperature is not None else run["temperature"]
            max_new_tokens = max_new_tokens or run["max_new_tokens"]
            if device == "auto":
                device = run["device"]
        if env is None:
            raise ConfigError("name an environment id (e.g. agentgym/Household-v0) or a training run's folder "
                              "(e.g. runs/household-tiny)")
        policy, split = policy or "random", split or "heldout"
        episodes, seed = 1 if episodes is None else episodes, 0 if seed is None else seed
        if episodes < 1:
            raise ConfigError(f"--episodes must be >= 1, got {episodes}")
        if not 0 < confidence < 1:
            raise ConfigError(f"--confidence must be between 0 and 1, got {confidence}")
        if temperature is not None and temperature < 0:
            raise ConfigError(f"--temperature must be >= 0, got {temperature}")
        spec = parse_policy_spec(policy)
        task_folder = tempfile.TemporaryDirectory(prefix="agentgym-eval-")  # a preset's filtered split, if any
        if layout:
            split = preset_tasks(layout, split, get_task_space(env), Path(task_folder.name))
        request = EvalRequest(env, split, episodes, limit, env_kwargs=(run or layout).get("env_kwargs") or None,
                              seed=seed, confidence=confidence, executor=executor, num_workers=workers)
        env_id, space, label, tasks = request.resolve()  # fail on a bad env or split before loading a model
        if spec.kind == "hf":
            resolve_device(device)  # an unusable device: one line before the model loads
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # "Loading weights 20/20" bars: our own bar follows
            except ImportError:
                pass  # load_policy names the missing extra

        trained = training_settings(spec.target) if spec.kind == "hf" and not layout else {}
        chat = dict((run or layout).get("chat") or trained.get("chat") or {})
        if history is not None:
            chat["history"] = _history(history)
        if temperature is None:
            temperature = 0.0 if episodes == 1 else 1.0
        if admissible_only is None:
            # scripted policies act on the admissible list themselves: only an LLM is decoded within it
            admissible_only = spec.kind == "hf" and bool((run or layout or trained).get("admissible_only"))
        sampling = SamplingParams(temperature=temperature, top_p=top_p, seed=seed, admissible_only=admissible_only,
                                  max_new_tokens=max_new_tokens or trained.get("max_new_tokens") or 64)
        for line in layout_lines(spec, env_id, chat, sampling, (run or layout).get("env_kwargs"), layout,
                                 bool(run or trained)):
            console.print(line, highlight=False, soft_wrap=True)
        if run:
            console.print(f"[dim]settings of the run in {from_run}: {len(tasks)} tasks x {episodes} episodes, "
                          f"temperature {temperature}{', admissible-only decoding' if admissible_only else ''}, seed {seed}, env_kwargs {run['env_kwargs']}, chat {chat}[/dim]",
                          highlight=False)
            if run["note"]:
                console.print(f"[yellow]note:[/yellow] {run['note']}", highlight=False)
            if not generates_with_trainer_model(run["engine"]) and temperature > 0:
                console.print(f"[yellow]note:[/yellow] the run generated with policy.engine={run['engine']}, this "
                              "evaluation with transformers: sampled episodes differ, expect the figure within its "
                              "interval rather than equal", highlight=False, soft_wrap=True)
        elif trained:
            console.print(f"[dim]chat settings from {trained['source']}: {chat}[/dim]")
            folder = Path(trained["source"]).parent
            if is_run_dir(folder) and (folder / "eval_heldout.jsonl").is_file():
                # its tasks, episode length and sampling are the env's defaults here, not the run's
                console.print(f"[yellow]note:[/yellow] to compare with the run's own figures, evaluate it as the "
                              f"trainer did: agentgym eval {folder}", highlight=False, soft_wrap=True)
        if spec.is_llm and episodes > 1 and temperature == 0:
            console.print("[yellow]warning:[/yellow] greedy decoding with --episodes > 1 repeats one episode; "
                          "pass@k needs --temperature > 0")

        if (too_small := power_warning(len(tasks), episodes)) is not None:
            console.print(f"[yellow]warning:[/yellow] {too_small}")
        if out is not None:  # before the episodes, not after them
            prepare_output_folder(out, "--out folder", "pass --out a folder you can write")
        console.print(f"loading {spec.label}", highlight=False, markup=False)
        source = run or layout
        hf_kwargs = {k: source[k] for k in ("dtype", "max_prompt_tokens") if source.get(k) is not None}
        pol = load_policy(spec, env_id, seed=seed, device=device, task_space=space, hf_kwargs=hf_kwargs)
        with progress.session() as session:  # a bar on a terminal; in a log, a line a minute and one at the end
            request = dataclasses.replace(request, env=env_id, task_space=space, chat=chat or None,
                                          sampling=sampling if spec.is_llm else None)
            result = run_eval(request, pol, policy_name=spec.label, trajectories_path=(out / "trajectories.jsonl")
                              if out is not None and save_trajectories else None, session=session)
        result.metadata["policy_spec"] = policy
        if run:
            result.metadata["run_dir"] = str(from_run)
        console.print(_summary_table(result, f"{spec.label} on {env_id} ({label})"))
        if len(result.categories) > 1:
            for table in _category_tables(result):
                console.print(table)
        if result.infra_errors:
            console.print(f"[yellow]{result.infra_errors} episode(s) hit infra errors (excluded):[/yellow] "
                          + "; ".join(result.infra_error_messages[:3]), highlight=False)
        if run.get("expected") is not None and policy == f"hf:{run['model']}" and limit is None:
            console.print(f"the run's final held-out success (summary.json): {run['expected']:.3f}; "
                          f"this evaluation: {result.success_rate:.3f}", highlight=False)
        if layout:
            result.metadata["preset"] = layout["name"]
        if out is not None:
            paths = write_report(result, out, plot=can_plot())
            console.print("report: " + ", ".join(str(p) for p in paths.values()), highlight=False)
            if "plot" not in paths:
                console.print(f"report.png not drawn: {NO_MATPLOTLIB}", highlight=False, soft_wrap=True)
        task_folder.cleanup()

    @app.command("eval-compare")
    def eval_compare_command(
        reports: list[Path] = typer.Argument(..., help="report.json files or the --out folders of `agentgym eval`"),
        label: Optional[list[str]] = typer.Option(None, "--label", "-l", help="a name per report, in order"),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="write compare.md, compare.json, compare.png"),
        title: str = typer.Option("Comparison", help="title of the table and plot"),
    ):
        """Compare evaluation reports (e.g. warm start vs trained) in one table, with success deltas."""
        from rich.markdown import Markdown

        # lazy: `agentgym --help` stays fast
        from agentgym import progress
        from agentgym.evaluation.report import comparability_warnings, compare, load_report

        results = [load_report(p) for p in reports]
        if out is not None:
            prepare_output_folder(out, "--out folder", "pass --out a folder you can write")
        if label and len(label) != len(results):
            raise ConfigError(f"got {len(label)} --label values for {len(results)} reports: give one per report")
        if label and len(set(label)) != len(label):
            raise ConfigError("--label values must be distinct")
        runs = dict(zip(label, results)) if label else results
        plot = can_plot()
        text = compare(runs, out, title=title, plot=plot)
        console = progress.output_console()
        for warning in comparability_warnings(runs):
            console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
        console.print(Markdown(text))
        if out is not None:
            console.print(f"written to {out}/compare.md, compare.json" + (", compare.png" if plot else ""),
                          highlight=False)
            if not plot:
                console.print(f"compare.png not drawn: {NO_MATPLOTLIB}", highlight=False, soft_wrap=True)
