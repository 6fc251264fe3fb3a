"""Issue 52, items 6-16: what the fourth hostile run threw at files, servers and settings, as
attacks tried / held. Each attack is a test case that fails while the hole is open:

  6-10  ALFWorld-v0 game folders: recursing / exploding grammars and grammar code, FIFOs, /dev/zero,
        oversized and deeply nested files, malformed traj_data.json, a pickle planted in the
        translation cache, the host's argv, library copies of unclosed envs, held-out games
        linked or copied into train/                          (tests/alfworld/test_hostile_games.py)
  11    the viewer: FIFOs, devices, oversized files and lines, a slow file holding up the others
                                                              (tests/viewer/test_viewer_hostile_files.py)
  12-13 `agentgym serve --allow-remote`: held-out tasks for remote clients however named, client
        errors on reset                                       (tests/openenv/test_remote_heldout.py)
  14-15 admissible-only decoding with nothing admissible or the json parser; bad config values
                                                              (tests/trainers/test_config_hostile_round4.py)
  16    a full disk during training                           (tests/trainers/test_disk_full.py)

    python benchmarks/robustness/hostile_round4_files.py        # ~5 minutes on a shared 2-core box
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SUITES = {
    "ALFWorld hostile game folders (items 6-10)": "tests/alfworld/test_hostile_games.py",
    "viewer: hostile run folders (item 11)": "tests/viewer/test_viewer_hostile_files.py",
    "serve --allow-remote: held-out tasks, reset errors (items 12-13)": "tests/openenv/test_remote_heldout.py",
    "admissible-only decoding and config values (items 14-15)": "tests/trainers/test_config_hostile_round4.py",
    "full disk during training (item 16)": "tests/trainers/test_disk_full.py",
}


def run() -> dict:
    """{"suites": [{"suite", "file", "cases", "held", "skipped", "not_held": [case names]}],
    "tried": attacks run, "held": attacks contained}."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
    from benchmarks.robustness.hostile import pytest_rows

    suites = []
    for suite, path in SUITES.items():
        rows = pytest_rows(path)
        suites.append({"suite": suite, "file": path, "cases": len(rows),
                       "held": sum(r["result"] == "contained" for r in rows),
                       "skipped": sum(r["result"] == "skipped" for r in rows),
                       "not_held": [r["case"] for r in rows if r["result"] == "NOT contained"]})
    return {"suites": suites, "tried": sum(s["cases"] - s["skipped"] for s in suites),
            "held": sum(s["held"] for s in suites)}


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
