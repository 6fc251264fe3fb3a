"""The package layout: sub-packages mapped from envs/ policies/ trainers/ tasks/ into agentgym.*"""

import subprocess
import sys
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


@pytest.mark.slow
def test_built_wheel_contains_mapped_packages(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True)
    wheel = next(tmp_path.glob("agentgym-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for pkg in _declared_packages():
        assert pkg.replace(".", "/") + "/__init__.py" in names, pkg
    assert not any(n.startswith(("envs/", "tasks/")) for n in names)
    assert any(n.startswith("agentgym/envs/household/splits/") for n in names), "split manifests not shipped"
    for static in ("index.html", "viewer.js", "viewer.css"):  # `agentgym view` works offline from the wheel
        assert f"agentgym/viewer/static/{static}" in names, static
