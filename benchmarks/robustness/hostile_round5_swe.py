"""Round 5 of the hostile runs on the SWE sandbox (issue 67, item 11; issue 69, item 1): what of the
project the bwrap sandbox shows, wherever the project lives.

The round-4 probe (hostile_round4_graders._WHEEL_AGENT: an agent that searches the sandbox for a
copy of the project, its reference sources, hidden tests or git history, copies the answer and
submits) is run from an editable install of a git checkout of this working tree, in two layouts:

    clone-named-agentgym  <tmp>/agentgym/ with its venv in <tmp>/agentgym/.venv, as
                          `git clone ... && bash scripts/setup.sh` makes it (issue 69, item 1:
                          the probe took the clone's folder name for the package);
    checkout-in-venv      <venv>/src/agentgym-credit/, as `pip install -e git+URL` lays it out
                          (issue 67, item 11: the agent read the answer from the checkout's .git,
                          6 of 6 solved).

The editable install is what pip makes for `pip install -e`: setuptools' PEP 660 editable wheel
of the checkout, installed into the venv.

    python benchmarks/robustness/hostile_round5_swe.py        # both layouts, about a minute
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness import hostile_round4_graders as round4  # noqa: E402

LAYOUTS = ("clone-named-agentgym", "checkout-in-venv")


def git_checkout(dest: Path) -> None:
    """A git repository at `dest` holding this working tree in one commit (the answers in its objects)."""
    round4.copy_working_tree(dest)
    git = ["git", "-C", str(dest), "-c", "user.name=probe", "-c", "user.email=probe@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + args, check=True, capture_output=True)


def install_editable(checkout: Path, site: Path, scratch: Path) -> None:
    """`pip install -e checkout` into the venv of `site`: setuptools builds the editable wheel
    (PEP 660) and it is installed there."""
    build = "import sys; from setuptools import build_meta; build_meta.build_editable(sys.argv[1])"
    subprocess.run([sys.executable, "-c", build, str(scratch)], cwd=checkout, check=True, capture_output=True)
    round4.install_wheel(next(scratch.glob("agentgym_credit-*.whl")), site)


def swe_checkout_probe(workdir: str | Path, layout: str, tasks: int = 1) -> dict:
    """Lay out a checkout and its venv as `layout` says, install the checkout editable, and let the
    searching agent run in that venv (from the checkout's folder, as the test suite runs)."""
    workdir = Path(workdir).resolve()
    if layout == "clone-named-agentgym":
        checkout = workdir / "agentgym"
        venv = checkout / ".venv"
    elif layout == "checkout-in-venv":
        venv = workdir / "venv"
        checkout = venv / "src" / "agentgym-credit"
    else:
        raise ValueError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    git_checkout(checkout)
    site = round4.make_venv(venv)
    (workdir / "build").mkdir()
    install_editable(checkout, site, workdir / "build")
    return {"layout": layout, "checkout": str(checkout), "venv": str(venv),
            "episodes": round4.run_agent(venv, checkout, tasks)}


def swe_checkout_rows() -> list[dict]:
    rows = []
    for layout in LAYOUTS:
        with tempfile.TemporaryDirectory() as d:
            report = swe_checkout_probe(d, layout)
        for ep in report["episodes"]:
            imported = ep["installed_at"].startswith(report["checkout"] + "/")
            rows.append(round4._row(
                f"swe: editable install, {layout}: search the sandbox for a copy or the git history",
                imported and ep["oracle_success"] and not ep["found"] and not ep["success"],
                f"found {len(ep['found'])} paths, reward {ep['reward']} (the fix: "
                f"{'solved' if ep['oracle_success'] else 'NOT solved'}), import in the sandbox: {ep['spec']}"))
    return rows


def run() -> dict:
    """The shape `benchmarks/robustness/hostile.py`'s tables read: one suite, its cases, held, and the attacks not held."""
    from agentgym.envs.swe.sandbox_bwrap import bwrap_works

    if not bwrap_works():
        return {"suites": [{"suite": "swe sandbox, project layouts (issue 67 item 11, issue 69 item 1)", "cases": 0,
                            "held": 0, "skipped": 1, "not_held": []}], "tried": 0, "held": 0,
                "skipped": ["swe: project layouts (bubblewrap cannot run here)"], "rows": []}
    rows = swe_checkout_rows()
    suite = {"suite": "swe sandbox, project layouts (issue 67 item 11, issue 69 item 1)", "cases": len(rows),
             "held": sum(r["held"] for r in rows), "skipped": 0,
             "not_held": [r["attack"] for r in rows if not r["held"]]}
    return {"suites": [suite], "tried": len(rows), "held": suite["held"], "skipped": [], "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="also write the result as JSON here")
    args = ap.parse_args()
    result = run()
    for r in result["rows"]:
        print(f"{'held' if r['held'] else 'BROKEN':6}  {r['attack']}  {r['detail']}")
    print(f"{result['held']} of {result['tried']} held" + "".join(f"; skipped: {s}" for s in result["skipped"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
