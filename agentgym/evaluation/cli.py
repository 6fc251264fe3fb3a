"""`agentgym eval` and `agentgym eval-compare`: held-out evaluation from the command line.

    agentgym eval agentgym/Household-v0 --policy oracle --split heldout --episodes 4 --out runs/eval/oracle
    agentgym eval agentgym/Household-v0 --policy hf:runs/household-tiny/final_model --limit 50
    agentgym eval agentgym/Household-v0 --policy openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct
    agentgym eval-compare runs/eval/warm runs/eval/trained --out runs/eval/compare

Policy specs: `random`, `oracle`, `hf:PATH` (a local HF folder or cached hub id; torch is imported
only then), `openai:URL:MODEL` (any OpenAI-compatible server). User errors raise AgentGymError,
which the `agentgym` entry point prints as one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer

from agentgym.errors import ConfigError, MissingExtraError

POLICY_HELP = "random | oracle | hf:PATH (HF model folder or hub id) | openai:URL:MODEL"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_OPENAI = re.compile(r"^(https?://[^/:\s]+(?::\d+)?(?:/[^:\s]*)?):(.+)$")


@dataclass
class PolicySpec:
    kind: str  # random | oracle | hf | openai
    target: str = ""  # model path / hub id, or base URL
    model: str = ""  # openai model name

    @property
    def label(self) -> str:
        if self.kind == "hf":
            return f"hf:{Path(self.target).name or self.target}"
        if self.kind == "openai":
            return f"openai:{self.model}"
        return self.kind

    @property
    def is_llm(self) -> bool:
        return self.kind in ("hf", "openai")


def parse_policy_spec(spec: str) -> PolicySpec:
    """Check the syntax of a --policy value (no model is loaded here)."""
    spec = spec.strip()
    if spec in ("random", "oracle"):
        return PolicySpec(spec)
    if spec.startswith("hf:"):
        path = spec[3:].strip()
        if not path:
            raise ConfigError("--policy hf:PATH needs a model folder or hub id after 'hf:'")
        looks_local = path.startswith((".", "/", "~")) or not _HUB_ID.match(path)
        if looks_local and not Path(path).expanduser().exists():
            raise ConfigError(f"model path {path!r} does not exist: pass a local HF model folder "
                              "(e.g. runs/household-tiny/final_model) or a hub id in the local cache")
        return PolicySpec("hf", path)
    if spec.startswith("openai:"):
        match = _OPENAI.match(spec[len("openai:"):].strip())
        if not match or match.group(2).isdigit():
            raise ConfigError(f"bad policy {spec!r}: write openai:URL:MODEL, "
                              "e.g. openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct")
        return PolicySpec("openai", match.group(1), match.group(2))
    raise ConfigError(f"unknown policy {spec!r}: choose {POLICY_HELP}")


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_policy(spec: PolicySpec, env_id: str, *, seed: int = 0, device: str = "auto", task_space=None):
    """Instantiate the policy a spec names; heavy backends are imported here, lazily."""
    from agentgym.policies import OraclePolicy, RandomPolicy

    if spec.kind == "random":
        return RandomPolicy(seed=seed)
    if spec.kind == "oracle":
        if task_space is None:
            from agentgym.registration import get_task_space

            task_space = get_task_space(env_id)
        return OraclePolicy(task_space)
    if spec.kind == "hf":
        try:
            from agentgym.policies.hf import HFPolicy
        except ImportError as exc:
            raise MissingExtraError(f"hf: policies need torch and transformers: run "
                                    f"`pip install 'agentgym[train]'` ({exc})") from None
        return HFPolicy(spec.target, device=_device(device))
    if spec.kind == "openai":
        try:
            from agentgym.policies.openai_compat import OpenAIPolicy
        except ImportError as exc:
            missing = getattr(exc, "name", "") or ""
            if missing.endswith("openai_compat"):
                raise MissingExtraError("the OpenAI-compatible policy backend (agentgym.policies.openai_compat) "
                                        "is not part of this agentgym install; upgrade agentgym") from None
            raise MissingExtraError(f"openai: policies need the openai client: run "
                                    f"`pip install 'agentgym[openai]'` ({exc})") from None
        return OpenAIPolicy(spec.target, spec.model)
    raise ConfigError(f"unknown policy kind {spec.kind!r}")


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
                    "source": str(config)}
    return {}


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

    from agentgym.evaluation.evaluate import METRIC_NAMES
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
        env: str = typer.Argument(..., help="environment id, e.g. agentgym/Household-v0"),
        policy: str = typer.Option("random", "--policy", "-p", help=POLICY_HELP),
        split: str = typer.Option("heldout", "--split", "-s",
                                  help="heldout | heldout_unseen | train, or a JSONL file of TaskSpecs"),
        episodes: int = typer.Option(1, "--episodes", "-k", help="episodes per task (pass@k for k up to this)"),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help="evaluate only the first N tasks"),
        out: Optional[Path] = typer.Option(None, "--out", "-o",
                                           help="write report.json, report.md, report.png and trajectories.jsonl here"),
        seed: int = typer.Option(0, help="reset seed of the first task (task i uses seed+i); also the sampling seed"),
        temperature: Optional[float] = typer.Option(
            None, help="LLM sampling temperature (default: 0 = greedy with --episodes 1, else 1.0)"),
        top_p: float = typer.Option(1.0, help="LLM nucleus sampling"),
        max_new_tokens: Optional[int] = typer.Option(
            None, help="LLM tokens per turn (default: the training run's, else 64)"),
        history: Optional[str] = typer.Option(
            None, help="past turns shown in each prompt, or 'full' (default: the training run's, else 2)"),
        device: str = typer.Option("auto", help="hf: device: auto | cpu | cuda | cuda:N"),
        executor: str = typer.Option("inprocess", help="inprocess | process"),
        workers: int = typer.Option(2, help="worker processes for --executor process"),
        confidence: float = typer.Option(0.95, help="confidence level of the intervals"),
        save_trajectories: bool = typer.Option(True, help="with --out, also save every trajectory"),
    ):
        """Evaluate a policy on held-out tasks: success rate, score, steps, invalid actions, pass@k, CIs."""
        from rich.console import Console

        import agentgym  # noqa: F401  registers the built-in envs
        from agentgym import progress
        from agentgym.policies.base import SamplingParams
        from agentgym.registration import check_env_id, get_task_space
        from agentgym.evaluation.evaluate import evaluate, resolve_tasks
        from agentgym.evaluation.report import write_report
        from agentgym.evaluation.stats import power_warning

        console = Console()
        if episodes < 1:
            raise ConfigError(f"--episodes must be >= 1, got {episodes}")
        if not 0 < confidence < 1:
            raise ConfigError(f"--confidence must be between 0 and 1, got {confidence}")
        if temperature is not None and temperature < 0:
            raise ConfigError(f"--temperature must be >= 0, got {temperature}")
        spec = parse_policy_spec(policy)
        env_id = check_env_id(env)
        space = get_task_space(env_id)
        label, tasks = resolve_tasks(env_id, split, limit, task_space=space)  # fail before loading a model

        trained = training_settings(spec.target) if spec.kind == "hf" else {}
        chat = dict(trained.get("chat") or {})
        if history is not None:
            chat["history"] = _history(history)
        if temperature is None:
            temperature = 0.0 if episodes == 1 else 1.0
        sampling = SamplingParams(temperature=temperature, top_p=top_p, seed=seed,
                                  max_new_tokens=max_new_tokens or trained.get("max_new_tokens") or 64)
        if trained:
            console.print(f"[dim]chat settings from {trained['source']}: {chat}[/dim]")
        if spec.is_llm and episodes > 1 and temperature == 0:
            console.print("[yellow]warning:[/yellow] greedy decoding with --episodes > 1 repeats one episode; "
                          "pass@k needs --temperature > 0")

        if (too_small := power_warning(len(tasks), episodes)) is not None:
            console.print(f"[yellow]warning:[/yellow] {too_small}")
        console.print(f"loading {spec.label}", highlight=False, markup=False)
        pol = load_policy(spec, env_id, seed=seed, device=device, task_space=space)
        with progress.session():  # a bar on a terminal; in a log, a line a minute and one at the end
            result = evaluate(
                env_id, pol, split, episodes_per_task=episodes, limit=limit, sampling=sampling if spec.is_llm else None,
                executor=executor, num_workers=workers, chat=chat or None, seed=seed, confidence=confidence,
                trajectories_path=(out / "trajectories.jsonl") if out is not None and save_trajectories else None,
                policy_name=spec.label, task_space=space,
            )
        result.metadata["policy_spec"] = policy
        console.print(_summary_table(result, f"{spec.label} on {env_id} ({label})"))
        if len(result.categories) > 1:
            for table in _category_tables(result):
                console.print(table)
        if result.infra_errors:
            console.print(f"[yellow]{result.infra_errors} episode(s) hit infra errors (excluded):[/yellow] "
                          + "; ".join(result.infra_error_messages[:3]), highlight=False)
        if out is not None:
            paths = write_report(result, out)
            console.print("report: " + ", ".join(str(p) for p in paths.values()), highlight=False)

    @app.command("eval-compare")
    def eval_compare_command(
        reports: list[Path] = typer.Argument(..., help="report.json files or the --out folders of `agentgym eval`"),
        label: Optional[list[str]] = typer.Option(None, "--label", "-l", help="a name per report, in order"),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="write compare.md, compare.json, compare.png"),
        title: str = typer.Option("Comparison", help="title of the table and plot"),
    ):
        """Compare evaluation reports (e.g. warm start vs trained) in one table, with success deltas."""
        from rich.console import Console
        from rich.markdown import Markdown

        from agentgym.evaluation.report import compare, load_report

        results = [load_report(p) for p in reports]
        if label and len(label) != len(results):
            raise ConfigError(f"got {len(label)} --label values for {len(results)} reports: give one per report")
        if label and len(set(label)) != len(label):
            raise ConfigError("--label values must be distinct")
        runs = dict(zip(label, results)) if label else results
        text = compare(runs, out, title=title)
        console = Console()
        console.print(Markdown(text))
        if out is not None:
            console.print(f"written to {out}/compare.md, compare.json, compare.png", highlight=False)
