"""benchmarks/robustness/hostile.py's round-4 part reads every round-4 module's `run()` in one shape (a list of
suites with cases, held and the attacks not held): the graders' module once returned only rows,
and the table crashed on it. The suites here are stand-ins for the slow probes; the shape is real."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness import hostile  # noqa: E402
from benchmarks.robustness import hostile_round4_graders as graders  # noqa: E402


def test_graders_run_gives_the_suites_the_round4_table_reads(monkeypatch):
    for name in ("swe_wheel_rows", "briefing_rows", "judge_rows", "meta_rows", "patch_rows"):
        monkeypatch.setattr(graders, name, lambda name=name: [graders._row(f"{name}: ok", True),
                                                             graders._row(f"{name}: broken", False)])
    monkeypatch.setattr("agentgym.envs.swe.sandbox_bwrap.bwrap_works", lambda: True)  # same table without bwrap
    monkeypatch.setattr(hostile, "ROUND4_MODULES", ("hostile_round4_graders",))
    (part,) = hostile.round4_table()
    assert part["module"] == "hostile_round4_graders" and part["tried"] == 10 and part["held"] == 5
    suites = {s["suite"]: s for s in part["suites"]}
    assert len(suites) == 5 and {s["cases"] for s in suites.values()} == {2}
    assert all(s["held"] == 1 and len(s["not_held"]) == 1 and s["not_held"][0].endswith("broken")
               for s in suites.values())
