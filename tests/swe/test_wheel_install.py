"""Issue 52, item 1: with a wheel (non-editable) install, the bwrap sandbox exposed the installed
package's bundled projects, reference sources and hidden tests; copying one file solved every
episode. The probe (benchmarks/robustness/hostile_round4_graders.py) builds a wheel of this checkout,
installs it into a fresh venv and searches the sandbox from there."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness import hostile_round4_graders as round4  # noqa: E402

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


def test_wheel_install_sandbox_exposes_no_answers(tmp_path):
    report = round4.swe_wheel_probe(tmp_path)
    (episode,) = report["episodes"]
    assert episode["installed_at"].startswith(report["site_packages"]), "the probe must run the wheel install"
    assert episode["oracle_success"], "grading must work in this install (else 'not solved' proves nothing)"
    assert episode["found"] == [], episode["found"]
    assert not episode["success"] and episode["reward"] == 0.0


def test_every_agentgym_folder_under_a_bound_root_is_hidden():
    """The class, not the instance: whatever folder of the project an import or a site-packages
    folder puts under a root the sandbox binds, it is in the list the sandbox hides."""
    import agentgym.envs.swe.env  # noqa: F401  (imports the envs package, whose data holds the answers)
    from agentgym.envs.swe import sandbox_bwrap

    binds = sandbox_bwrap.python_binds()
    hidden = sandbox_bwrap.agentgym_folders(["/"])  # as if the whole filesystem were bound
    data = Path(agentgym.envs.swe.env.__file__).resolve().parent / "data" / "repos"
    assert any(str(data).startswith(h + "/") for h in hidden), (data, hidden)
    assert all(not h.startswith(tuple(b + "/" for b in binds)) or h in sandbox_bwrap.agentgym_folders(binds)
               for h in hidden)


def test_a_copy_installed_for_another_python_under_a_bound_root_is_hidden(tmp_path):
    """System layouts: a copy under <root>/lib/python3.X/dist-packages or <root>/local/lib/...
    (the sandbox binds /usr whole) is found without being on this interpreter's sys.path."""
    from agentgym.envs.swe import sandbox_bwrap

    planted = []
    for sub in ("lib/python3.12/dist-packages", "local/lib/python3.10/site-packages", "lib/python3/dist-packages"):
        pkg = tmp_path / sub / "agentgym" / "envs" / "swe" / "data" / "repos"
        pkg.mkdir(parents=True)
        (tmp_path / sub / "agentgym-0.1.0.dist-info").mkdir()
        (tmp_path / sub / "agentgym_credit-0.1.0.dist-info").mkdir()  # the distribution's name since issue 53
        planted += [str((tmp_path / sub / name).resolve())
                    for name in ("agentgym", "agentgym-0.1.0.dist-info", "agentgym_credit-0.1.0.dist-info")]
    hidden = sandbox_bwrap.agentgym_folders([str(tmp_path.resolve())])
    assert set(planted) <= set(hidden), sorted(set(planted) - set(hidden))
