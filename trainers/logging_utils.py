"""Run metrics: a JSONL file always, TensorBoard and Weights & Biases when available.

`metrics.jsonl` in the run folder is the record of truth: one JSON object per `log` call,
`{"step": N, "time": unix_seconds, <metric>: <number>, ...}`. TensorBoard and W&B are extra
views of the same numbers; neither is ever required, and W&B never prompts for a login.
Nothing here imports torch at module level (TensorBoard's torch writer is imported only when
TensorBoard is actually used and tensorboardX is absent).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from agentgym.errors import MissingExtraError, install_hint
from agentgym.figures import pyplot_agg, save_figure

METRICS_FILE = "metrics.jsonl"
_RESERVED = ("step", "time")


def _scalar(value: Any) -> float | int | bool | str | None:
    """A JSON-friendly scalar from Python, numpy or torch numbers.

    NaN and inf become null: strict JSON has no spelling for them, and a reader should see
    "no number here" rather than fail to parse the whole file."""
    if hasattr(value, "item") and callable(value.item):  # numpy / torch 0-d values
        try:
            value = value.item()
        except (ValueError, RuntimeError):  # not a single element
            return None
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"eval": {"success": 0.5}} -> {"eval/success": 0.5}: one namespace for every backend."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, prefix=f"{name}/"))
        else:
            flat[name] = _scalar(value)
    return flat


def read_metrics(source: str | Path) -> list[dict]:
    """The records of a run folder or a metrics.jsonl file, in file order.

    A torn last line (the process was killed mid-write) is skipped instead of failing, and so is
    any line that is not a JSON object (nested past the parser, a list, bytes that are not UTF-8)."""
    path = _metrics_path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no metrics file at {path}")
    records = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def _metrics_path(source: str | Path) -> Path:
    path = Path(source)
    return path / METRICS_FILE if path.is_dir() or not path.suffix else path


class MetricsLogger:
    """Log scalar metrics per training step to JSONL, TensorBoard and W&B.

    tensorboard: True (required), False, or "auto" (used when tensorboardX or
        torch.utils.tensorboard + tensorboard are importable).
    wandb: True (required), False, or "auto": used only when `wandb` is installed AND the user
        asked for it through `wandb_project`, WANDB_PROJECT or WANDB_MODE (online/offline);
        WANDB_MODE=disabled always wins. Without credentials an online run falls back to
        offline mode instead of prompting.
    resume_from_step: when continuing a run from a checkpoint taken at this step, records of
        later steps (written after the checkpoint by the interrupted run) are dropped, so the
        file reads as if the run had never stopped.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool | str = "auto",
        wandb: bool | str = "auto",
        wandb_project: str | None = None,
        run_name: str | None = None,
        config: Mapping[str, Any] | None = None,
        resume_from_step: int | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / METRICS_FILE
        if resume_from_step is not None:
            self._truncate_after(resume_from_step)
        self._file = self.path.open("a", encoding="utf-8")
        self.run_name = run_name or self.run_dir.name
        self._tb = self._open_tensorboard(tensorboard)
        self._wandb = self._open_wandb(wandb, wandb_project, config)
        self.last_step: int | None = None

    # --- public API ---------------------------------------------------------------------
    def log(self, metrics: Mapping[str, Any], step: int) -> dict:
        """Record `metrics` (nested dicts are flattened with '/') at `step`; returns the record."""
        flat = flatten(metrics)
        clash = [k for k in _RESERVED if k in flat]
        if clash:
            raise ValueError(f"metric names {clash} are reserved by the logger")
        record = {"step": int(step), "time": round(time.time(), 3), **flat}
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()  # a crashed run keeps every line logged before the crash
        numbers = {k: v for k, v in flat.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if self._tb is not None:
            for key, value in numbers.items():
                self._tb.add_scalar(key, value, int(step))
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(numbers, step=int(step))
        self.last_step = int(step)
        return record

    @property
    def backends(self) -> list[str]:
        names = ["jsonl"]
        if self._tb is not None:
            names.append("tensorboard")
        if self._wandb is not None:
            names.append("wandb")
        return names

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> "MetricsLogger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- backends -----------------------------------------------------------------------
    def _truncate_after(self, step: int) -> None:
        if not self.path.is_file():
            return
        kept = [r for r in read_metrics(self.path) if int(r.get("step", -1)) <= step]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for record in kept:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path)

    def _open_tensorboard(self, wanted: bool | str):
        if wanted is False or wanted == "off":
            return None
        logdir = str(self.run_dir / "tensorboard")
        try:
            from tensorboardX import SummaryWriter  # light: no torch

            return SummaryWriter(logdir=logdir)
        except ImportError:
            pass
        try:
            import tensorboard  # noqa: F401  torch's writer needs it; check before importing torch
            from torch.utils.tensorboard import SummaryWriter

            return SummaryWriter(log_dir=logdir)
        except ImportError as exc:
            if wanted is True:
                raise MissingExtraError(
                    f"TensorBoard logging needs tensorboardX (or tensorboard and torch): "
                    f"run `{install_hint('logging')}` ({exc})"
                ) from exc
            return None

    def _open_wandb(self, wanted: bool | str, project: str | None, config: Mapping[str, Any] | None):
        mode = os.environ.get("WANDB_MODE", "").strip().lower()
        if wanted is False or wanted == "off" or mode == "disabled":
            return None
        project = project or os.environ.get("WANDB_PROJECT")
        if wanted == "auto" and not project and mode not in ("online", "offline"):
            return None  # installed is not the same as asked for
        try:
            import wandb
        except ImportError as exc:
            if wanted is True:
                raise MissingExtraError(f"W&B logging needs wandb: run `{install_hint('logging')}` ({exc})") from exc
            return None
        if mode != "offline" and not _wandb_has_credentials():
            print("agentgym: no W&B credentials found; logging to W&B in offline mode "
                  "(sync later with `wandb sync`)", file=sys.stderr)
            mode = "offline"
        try:
            return wandb.init(project=project or "agentgym", name=self.run_name, dir=str(self.run_dir),
                              config=dict(config or {}), mode=mode or "online")
        except Exception as exc:  # a W&B outage must not stop training; the JSONL still has it all
            if wanted is True:
                raise
            warnings.warn(f"W&B logging disabled: {type(exc).__name__}: {exc}", stacklevel=3)
            return None


def _wandb_has_credentials() -> bool:
    """Whether W&B can authenticate without asking: an API key in the environment, an identity
    token file, or a .netrc entry for the W&B host. Read with the standard library, because
    W&B's own lookups change between versions and some of them prompt."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    import netrc
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


# --- plots --------------------------------------------------------------------------------

def _series(records: Iterable[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) where `key` holds a number; a resumed run's repeated steps keep the last."""
    by_step: dict[int, float] = {}
    for r in records:
        value = r.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and "step" in r:
            by_step[int(r["step"])] = float(value)
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def _smoothed(values: list[float], weight: float) -> list[float]:
    """TensorBoard-style exponential moving average with debiasing (weight 0 = raw values)."""
    if weight <= 0:
        return values
    out, avg = [], 0.0
    for i, v in enumerate(values, 1):
        avg = weight * avg + (1 - weight) * v
        out.append(avg / (1 - weight**i))
    return out


def numeric_keys(records: Iterable[dict]) -> list[str]:
    keys: dict[str, None] = {}
    for r in records:
        for k, v in r.items():
            if k not in _RESERVED and isinstance(v, (int, float)) and not isinstance(v, bool):
                keys.setdefault(k)
    return list(keys)


def plot_learning_curves(
    runs: str | Path | Mapping[str, str | Path],
    keys: Sequence[str] | None = None,
    out_png: str | Path | None = None,
    *,
    smooth: float = 0.0,
    title: str | None = None,
    columns: int = 3,
) -> Path:
    """Plot metrics against step, one panel per key, one line per run; returns the PNG path.

    runs: a run folder or metrics.jsonl, or {label: folder or file} to overlay several runs
        (e.g. one per estimator or seed).
    keys: metrics to plot (default: every numeric key of the first run).
    out_png: default `<run_dir>/learning_curves.png` for a single run.
    smooth: EMA weight in [0, 1); the raw values are drawn faintly underneath.
    """
    if not 0 <= smooth < 1:
        raise ValueError("smooth must be in [0, 1)")
    sources = dict(runs) if isinstance(runs, Mapping) else {_metrics_path(runs).parent.name: runs}
    if not sources:
        raise ValueError("no runs to plot")
    data = {label: read_metrics(src) for label, src in sources.items()}
    if keys is None:
        keys = numeric_keys(next(iter(data.values())))
    keys = list(keys)
    if not keys:
        raise ValueError("no numeric metrics to plot")
    missing = [k for k in keys if not any(_series(recs, k)[0] for recs in data.values())]
    if len(missing) == len(keys):
        raise ValueError(f"none of the keys {keys} appear in the metrics")
    if out_png is None:
        if isinstance(runs, Mapping):
            raise ValueError("out_png is required when plotting several runs")
        out_png = _metrics_path(runs).parent / "learning_curves.png"
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)

    plt = pyplot_agg()
    cols = max(1, min(columns, len(keys)))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for i, (label, records) in enumerate(data.items()):
            steps, values = _series(records, key)
            if not steps:
                continue
            color = f"C{i % 10}"
            marker = "o" if len(steps) <= 30 else None  # sparse series (periodic eval) show points
            if smooth > 0:
                ax.plot(steps, values, color=color, alpha=0.25, linewidth=1)
            ax.plot(steps, _smoothed(values, smooth), color=color, label=label, marker=marker, markersize=3)
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    if len(data) > 1:
        axes.flat[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, out_png)
