"""Figures: pyplot on a backend that needs no display, and the one way a figure is written (laid
out, its folder made, saved as PNG and closed: an open matplotlib figure holds memory until the
process ends). matplotlib is optional (the train extra) and loaded on first use."""

from __future__ import annotations

from pathlib import Path

from agentgym.errors import MissingExtraError, install_hint


def pyplot_agg():
    """matplotlib's pyplot on the Agg backend (no display needed), imported on first use."""
    try:
        import matplotlib  # optional: only plotting needs it
    except ImportError as exc:
        raise MissingExtraError(f"plots need matplotlib: run `{install_hint('train')}` ({exc})") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Lay `fig` out tightly, write it to `path` (its folder made when missing), close it."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot_agg().close(fig)
    return path
