"""benchmarks/README.md lists every script of benchmarks/ and names none that does not exist: a
script added, moved or removed without its row fails here."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def listed_scripts(readme: str) -> set[str]:
    """The scripts the README's rows link to, relative to benchmarks/ (links into ../docs and
    elsewhere are not scripts of this folder)."""
    return {target for target in re.findall(r"\]\(([^)\s]+\.py)\)", readme)
            if not target.startswith(("../", "/", "http"))}


def scripts_on_disk() -> set[str]:
    return {p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.rglob("*.py")
            if p.name != "__init__.py" and "__pycache__" not in p.parts}


def test_every_script_has_a_row_and_every_row_a_script():
    listed = listed_scripts((BENCHMARKS / "README.md").read_text(encoding="utf-8"))
    on_disk = scripts_on_disk()
    assert not on_disk - listed, f"add a row to benchmarks/README.md for: {sorted(on_disk - listed)}"
    assert not listed - on_disk, f"benchmarks/README.md names scripts that do not exist: {sorted(listed - on_disk)}"


def test_the_check_sees_a_missing_row_and_a_stale_one():
    """The parser against a README with one row gone and one row of a script that is not there."""
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    dropped = readme.replace("[learning/verdict.py](learning/verdict.py)", "learning/verdict.py")
    assert "learning/verdict.py" in scripts_on_disk() - listed_scripts(dropped)
    stale = readme + "\n| [speed/gone.py](speed/gone.py) | x | y |\n"
    assert listed_scripts(stale) - scripts_on_disk() == {"speed/gone.py"}
