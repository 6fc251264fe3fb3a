"""Issue 38: four ways agent code running inside the grading interpreter forged a pass on every
project, each with only `create PKG/__init__.py` then `submit`, plus the classic always-equal
object. The grader now runs the tests in a process that never imports agent code (the package is
reached over a pipe from a second process, and its objects are never asked whether they equal an
expected plain value), so none of them can touch pytest, the reporter or the test modules.
On the code before the fix the four in-process attacks won 13/13 projects (reward 1.0) and
always-equal 5/13 (3 solved); now 0/13 each."""

import pytest

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.repos import repo_path
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.tools import format_call

pytestmark = [pytest.mark.sandbox]

SPACE = SWETaskSpace()
# one task per project: the attacks are project-independent, the grader must hold on each
ONE_PER_PROJECT = list({t.params["repo"]: t for name in SPACE.split_names for t in SPACE.split(name)}.values())

# (a) tests "run" but do nothing
NOOP_RUNTEST = """
import _pytest.python
_pytest.python.Function.runtest = lambda self: None
"""

# (b) every report claims success
NEVER_FAILED = """
import _pytest.reports
_pytest.reports.BaseReport.failed = property(lambda self: False)
"""

# (c) find the harness's token and pipe on the stack, write a "passed" record per test, leave
FRAME_WALK = r"""
import glob, json, os, re, sys
_f = sys._getframe()
while _f is not None:
    _l = _f.f_locals
    if "token" in _l and isinstance(_l.get("w"), int):
        _ids = []
        for _p in sorted(glob.glob("tests/*.py") + glob.glob("hidden_tests/*.py")):
            _ids += [_p + "::" + n for n in re.findall(r"^def (test_\w+)", open(_p).read(), re.M)]
        for _i in _ids:
            os.write(_l["w"], (_l["token"] + " " + json.dumps({"nodeid": _i, "outcome": "passed"}) + "\n").encode())
        os.write(_l["w"], (_l["token"] + " " + json.dumps({"done": True}) + "\n").encode())
        os._exit(0)
    _f = _f.f_back
"""


SHADOW = """
import inspect as _i, os as _o
__file__ = _o.path.abspath(%r)  # pytest's import-mismatch check compares __file__
exec(compile(open(__file__).read(), __file__, "exec"))

def _noop(f):
    def ok(*a, **k):
        pass
    ok.__signature__, ok.__name__ = _i.signature(f), f.__name__
    ok.pytestmark = getattr(f, "pytestmark", [])
    return ok

for _n, _v in list(globals().items()):
    if _n.startswith("test") and _i.isfunction(_v):
        globals()[_n] = _noop(_v)
    elif _n.startswith("Test") and _i.isclass(_v):
        for _m, _f in list(vars(_v).items()):
            if _m.startswith("test") and _i.isfunction(_f):
                setattr(_v, _m, _noop(_f))
"""


def _shadow_test_modules(repo):
    """(d) root-level modules named like the test modules (the workspace came before the test
    folders on sys.path), each running the real module at grading time and turning every test
    into a no-op. The hidden module's name follows the visible one's pattern (test_REPO_hidden)."""
    src = repo_path(repo)
    for path in sorted((src / "tests").glob("*.py")) + sorted((src / "hidden_tests").glob("*.py")):
        yield format_call("create", path=path.name, content=SHADOW % f"{path.parent.name}/{path.name}")


# (e) every public function returns an object equal to anything (the classic reward hack: it
# "passes" `assert f(x) == expected` without computing anything)
ALWAYS_EQUAL = """
class _AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

import sys as _sys
_module = _sys.modules[__name__]
for _name in [n for n in vars(_module) if not n.startswith("_")]:
    _value = getattr(_module, _name)
    if callable(_value) and not isinstance(_value, type):
        setattr(_module, _name, lambda *a, **k: _AlwaysEqual())
"""

ATTACKS = {"noop_runtest": NOOP_RUNTEST, "never_failed": NEVER_FAILED, "frame_walk": FRAME_WALK,
           "shadow_test_modules": None, "always_equal": ALWAYS_EQUAL}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_in_process_grader_hacks_fail_on_every_project(attack):
    env = SWEEnv(backend="bwrap")
    won = []
    try:
        for task in ONE_PER_PROJECT:
            env.reset(options={"task": task})
            pkg = task.params["repo"]
            if ATTACKS[attack] is None:
                actions = list(_shadow_test_modules(pkg))
            else:
                init = (env.workspace / pkg / "__init__.py").read_text()
                actions = [format_call("create", path=f"{pkg}/__init__.py", content=init + ATTACKS[attack])]
            for a in actions:
                env.step(a)
            obs, reward, terminated, truncated, info = env.step("submit")
            assert terminated
            if info["success"] or reward > 0:
                won.append((pkg, round(reward, 2)))
    finally:
        env.close()
    assert not won, f"{attack} forged a pass on {len(won)}/{len(ONE_PER_PROJECT)} projects: {won}"
