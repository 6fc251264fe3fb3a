"""Figures: pyplot on a backend that needs no display, and the one way a figure is written (laid
out, its folder made, saved as PNG and closed: an open matplotlib figure holds memory until the
process ends). matplotlib is optional (the train and logging extras) and loaded on first use."""

from __future__ import annotations

from pathlib import Path

from agentgym.errors import MissingExtraError, install_hint


# What a command prints instead of a figure it was not asked for by name when matplotlib is absent: its
# data files (JSON, markdown) are written either way, so a plot alone never fails an evaluation.
NO_MATPLOTLIB = "matplotlib is not installed: `pip install matplotlib` (the train and logging extras have it)"


def can_plot() -> bool:
    """Whether matplotlib can be imported (a core install has no plotting library)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pyplot_agg():
    """matplotlib's pyplot on the Agg backend (no display needed), imported on first use."""
    try:
        import matplotlib  # optional: only plotting needs it
    except ImportError as exc:
        raise MissingExtraError(f"plots need matplotlib: run `{install_hint('train')}` or `pip install matplotlib` "
                                f"({exc})") from exc
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
