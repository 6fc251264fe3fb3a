"""The package layout: sub-packages mapped from envs/ policies/ trainers/ tasks/ into agentgym.*,
and the built wheel: quiet to build, complete, and working from a fresh venv."""

import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"agentgym": "agentgym", "envs": "agentgym.envs", "policies": "agentgym.policies",
          "trainers": "agentgym.trainers", "tasks": "agentgym.tasks"}


def _declared_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def _package_dirs() -> set[str]:
    found = set()
    for top, name in MAPPED.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top)
            # data folders (e.g. sample repositories shipped as package data) are not packages
            if "data" in rel.parts or "__pycache__" in rel.parts:
                continue
            found.add(".".join([name, *rel.parts]))
    return found


def test_every_subpackage_is_declared_in_pyproject():
    missing = _package_dirs() - _declared_packages()
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_every_declared_package_exists():
    assert _declared_packages() <= _package_dirs()


def test_no_top_level_envs_or_tasks_package_installed():
    for name in ("envs", "tasks", "trainers", "policies"):
        out = subprocess.run([sys.executable, "-c", f"import importlib.util as u; print(u.find_spec('{name}'))"],
                             capture_output=True, text=True, cwd="/")
        assert out.stdout.strip() == "None", f"a top-level package {name!r} is importable: {out.stdout}"


def test_import_agentgym_does_not_import_torch():
    code = "import sys, agentgym, agentgym.envs, agentgym.tasks, agentgym.policies; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


_SKIP = shutil.ignore_patterns(".venv", "build", "dist", ".git", "__pycache__", "*.egg-info", "runs", "out",
                               ".pytest_cache", ".hypothesis", "*.pyc")
_NOISE = ("would be ignored", "deprecated", "SetuptoolsDeprecationWarning")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(wheel path, build output) from a copy of the source tree: an in-tree build/ folder left by
    an earlier build could otherwise ship files that no longer exist."""
    src = tmp_path_factory.mktemp("src") / "agentgym"
    shutil.copytree(ROOT, src, ignore=_SKIP)
    out_dir = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                           str(out_dir), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return next(out_dir.glob("*.whl")), proc.stdout + proc.stderr, src


def test_the_distribution_name_is_ours_everywhere():
    """Issue 53, item 5: `agentgym` in the package registry is an unrelated project. Every install
    command in the docs, scripts and error messages names our distribution; `import agentgym` stays."""
    import re

    from agentgym.errors import DISTRIBUTION, install_hint

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION != "agentgym"
    assert all(extra.startswith(f"{DISTRIBUTION}[") for extra in project["optional-dependencies"]["all"])
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *ROOT.glob("scripts/*.sh"), *ROOT.glob("docs/*.md"),
             *ROOT.glob("envs/*/README.md"), *[p for top in MAPPED for p in (ROOT / top).rglob("*.py")]]
    wrong = [f"{f.relative_to(ROOT)}: {m.group(0)}" for f in files for m in
             re.finditer(r"(?<![\w./-])agentgym\\?\[[a-z,]+", f.read_text(encoding="utf-8"))]
    assert not wrong, wrong
    assert install_hint("train") == f"pip install '{DISTRIBUTION}[train]'"


@pytest.mark.slow
def test_the_wheel_carries_our_distribution_name(built):
    from agentgym.errors import DISTRIBUTION

    wheel = zipfile.ZipFile(built[0])
    metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    fields = dict(line.split(": ", 1) for line in wheel.read(metadata).decode().splitlines() if ": " in line)
    assert fields["Name"] == DISTRIBUTION and built[0].name.startswith(DISTRIBUTION.replace("-", "_") + "-")


@pytest.mark.slow
def test_building_prints_no_setuptools_warnings(built, tmp_path):
    _, output, src = built
    assert not [n for n in _NOISE if n in output], output[-3000:]
    # the editable build (what `pip install -e .` runs) too
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.build_editable(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=src, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not [n for n in _NOISE if n in proc.stdout + proc.stderr], (proc.stdout + proc.stderr)[-3000:]


@pytest.mark.slow
def test_every_file_ships_in_the_wheel(built):
    names = set(zipfile.ZipFile(built[0]).namelist())
    missing = []
    for top, pkg in MAPPED.items():
        for f in (ROOT / top).rglob("*"):
            if f.is_dir() or "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            rel = f.relative_to(ROOT / top)
            if top == "agentgym" and rel.parts[0] in MAPPED:
                continue
            if f"{pkg.replace('.', '/')}/{rel.as_posix()}" not in names:
                missing.append(str(f.relative_to(ROOT)))
    assert not missing, f"not in the wheel: {missing[:20]}"
    assert any(n.startswith("agentgym/envs/textworld/splits/tw-simple/") for n in names)


_FROM_WHEEL = textwrap.dedent("""
    import sys, agentgym, gymnasium as gym
    assert agentgym.__file__.startswith(sys.argv[1]), agentgym.__file__

    def solves(env_id, space, task):
        if env_id != "agentgym/SWE-v0":
            return space.validate(task)
        # bwrap binds only this venv's prefix, not the dependencies linked in from the dev venv
        env = gym.make(env_id, backend="local").unwrapped
        try:
            env.reset(options={"task": task})
            for action in space.solve(task):
                *_, info = env.step(action)
            return info["success"]
        finally:
            env.close()
    skip = {"agentgym/OpenEnv-v0", "agentgym/TextWorld-v0"}
    have_textworld = __import__("importlib.util").util.find_spec("textworld") is not None
    for env_id in sorted(agentgym.registered_envs()):
        if env_id in skip or (env_id.startswith("agentgym/TextWorld") and not have_textworld):
            continue
        space = agentgym.get_task_space(env_id)
        checked = 0
        for name in space.split_names:
            tasks = space.split(name)
            assert tasks or name == "heldout_unseen", (env_id, name)
            if env_id == "agentgym/WebShop-Browser-v0":
                continue  # the same tasks and oracle as WebShop-v0; the browser needs chromium
            for task in tasks[:1]:
                assert solves(env_id, space, task), (env_id, name, task.task_id)
                checked += 1
        print(env_id, checked)
""")


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_loads_splits_and_solves_tasks(built, tmp_path):
    """The wheel installed (not editable) into a new venv; dependencies come from this venv's
    site-packages through a .pth line (offline, fast), agentgym itself only from the wheel."""
    wheel = built[0]
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert (site / "agentgym" / "envs" / "textworld" / "splits" / "tw-simple").is_dir()
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([str(py), "-c", _FROM_WHEEL, str(site)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    solved = dict(line.rsplit(" ", 1) for line in proc.stdout.split("\n") if line.startswith("agentgym/"))
    for family in ("Household", "WebShop", "ToolUse", "SearchQA", "SWE"):
        assert int(solved[f"agentgym/{family}-v0"]) >= 2, proc.stdout
    if __import__("importlib.util").util.find_spec("textworld") is not None:  # splits one level deeper
        for challenge in ("Simple", "CoinCollector", "TreasureHunter", "Cooking", "Custom"):
            assert int(solved[f"agentgym/TextWorld-{challenge}-v0"]) >= 2, proc.stdout
    # the entry-point commands come from the wheel's metadata
    proc = subprocess.run([str(venv / "bin" / "agentgym"), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "serve" in proc.stdout and "train" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.slow
def test_built_wheel_contains_mapped_packages(built):
    names = zipfile.ZipFile(built[0]).namelist()
    for pkg in _declared_packages():
        assert pkg.replace(".", "/") + "/__init__.py" in names, pkg
    assert not any(n.startswith(("envs/", "tasks/")) for n in names)
    assert any(n.startswith("agentgym/envs/household/splits/") for n in names), "split manifests not shipped"
    for static in ("index.html", "viewer.js", "viewer.css"):  # `agentgym view` works offline from the wheel
        assert f"agentgym/viewer/static/{static}" in names, static
