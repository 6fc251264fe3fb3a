"""The zero-shot table's results file: rows come from the trajectories a run has played, and rows of
cells played elsewhere (another machine, another work folder) are kept, not dropped."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports

from benchmarks.learning import zero_shot  # noqa: E402

from agentgym.policies import RandomPolicy  # noqa: E402
from agentgym.registration import get_task_space  # noqa: E402
from agentgym.rollout import collect  # noqa: E402


def test_rows_of_cells_played_elsewhere_are_kept(tmp_path):
    out = tmp_path / "real_llm.json"
    elsewhere = {"family": "household", "mode": "free", "max_steps": 12, "tasks": 20, "tasks_wanted": 50}
    replaced = {"family": "household", "mode": "random", "max_steps": 50, "tasks": 1, "tasks_wanted": 1}
    out.write_text(json.dumps({"rows": [elsewhere, replaced], "rl_table": {"kept": True}}))
    env_id = "agentgym/Household-v0"
    tasks = get_task_space(env_id).split("heldout")[:2]
    played = collect(env_id, tasks, RandomPolicy(seed=0), group_size=1, max_turns=50)
    cell = tmp_path / "work" / "household-steps50" / "random.jsonl"
    cell.parent.mkdir(parents=True)
    cell.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in played))
    cell.with_suffix(".cost.json").write_text(json.dumps({"seconds": 1.0, "tasks_wanted": 2}))

    zero_shot.write_results(out, tmp_path / "work", settings={"model": "m"})

    whole = json.loads(out.read_text())
    rows = {(r["family"], r["mode"], r["max_steps"]): r for r in whole["rows"]}
    assert rows[("household", "free", 12)] == elsewhere
    assert rows[("household", "random", 50)]["tasks"] == 2  # recomputed from the trajectories played here
    assert whole["rl_table"] == {"kept": True} and whole["settings"] == {"model": "m"}
