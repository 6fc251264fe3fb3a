"""GiGPO's step part of the advantage on useful, idle and invalid steps, recomputed offline from a
run's saved training batches (`<run>/trajectories/train_iter*.jsonl`), with the run's estimator
settings and with one setting changed (default: the invalid-action penalty at 0), so what a
setting does to the credit of each kind of step is seen on the very same episodes.

    python benchmarks/diagnostics/step_credit_offline.py runs/household-tiny [--set estimator.invalid_penalty=0]

Prints per saved iteration the mean step advantage on idle / useful / invalid steps under both
settings, and their means over the iterations.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

KINDS = ("idle", "useful", "invalid")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a run folder with trajectories/train_iter*.jsonl and config.yaml")
    ap.add_argument("--set", default="estimator.invalid_penalty=0", help="the one override to compare")
    args = ap.parse_args()

    from agentgym.registration import get_task_space
    from agentgym.tasks.protocol import idle_commands
    from agentgym.trainers.config import load_config
    from agentgym.trainers.diagnostics import iteration_credit
    from agentgym.trainers.estimators import compute_advantages
    from agentgym.trajectory import Trajectory

    run = Path(args.run)
    settings = {"as run": load_config(str(run / "config.yaml"), []),
                args.set: load_config(str(run / "config.yaml"), [args.set])}
    paths = sorted((run / "trajectories").glob("train_iter*.jsonl"))
    if not paths:
        raise SystemExit(f"{run}/trajectories has no train_iter*.jsonl: train with log.save_trajectories_every > 0")
    means: dict[str, list[list[float]]] = {name: [] for name in settings}
    print(f"mean step advantage, {' / '.join(KINDS)} steps")
    for path in paths:
        trajectories = [Trajectory.from_dict(json.loads(line)) for line in path.open()]
        cells = []
        for name, cfg in settings.items():
            credit = iteration_credit(trajectories, compute_advantages(trajectories, cfg.estimator), cfg.estimator,
                                      idle_commands(get_task_space(cfg.env.id)))
            row = [credit["adv_step"].get(k) for k in KINDS]
            means[name].append([np.nan if x is None else x for x in row])
            cells.append(f"{name}: " + " / ".join("-" if x is None else f"{x:+.3f}" for x in row))
        print(f"iteration {int(path.stem[-5:]):3d}  " + "   ".join(cells))
    for name, rows in means.items():
        print(f"mean over {len(rows)} iterations, {name}: "
              + " / ".join(f"{x:+.4f}" for x in np.nanmean(np.array(rows), axis=0)))


if __name__ == "__main__":
    main()
