"""Hostile-input benchmark (issue 19): what an RL policy (or a tester) can throw at the envs.

Three parts, each with the goal 0:
1. Hostile actions per env id: random bytes, NUL bytes, huge numbers, JSON bombs, overlong
   text, paths out of the workspace, mixed with well-formed actions; counts exceptions from
   reset/step, info dicts missing keys, and the fds, child processes and `agentgym-swe-*`
   folders left after the envs are closed.
2. The SWE attack list of issue 19 plus the sandbox escape suite, as contained / not contained
   (runs tests/swe/test_hostile.py and tests/swe/test_escape.py, one row per attack).
3. Held-out contamination: per family, 10,000 generated tasks (samples over every region,
   mutations, and adversarial copies of held-out tasks: new seed, relabelled env id, numbers
   re-typed); counts those the training gate (the task generator's admission checks without
   the oracle run) lets through that are held out by id, by canonical content or by region.
4. What the third hostile run found (issue 38), one row per case, contained or not: the four
   in-process grader hacks on all 13 SWE projects, the grader protocol's hostile-peer cases,
   OpenEnv sessions/origins/frames/binds, --resume and corrupted or crafted checkpoints,
   hostile YAML and config values (with a property test over every field), malformed
   trajectory lines in the viewer, WebShop pickling and temp folders, SWE workspace reaping.
   `--issue38-only` runs just this part (a few minutes).
5. What the fourth hostile run found (issue 52): reward and grader integrity (items 1-5,
   benchmarks/robustness/hostile_round4_graders.py) and hostile files, servers, admissible-only decoding,
   config values and a full disk (items 6-16, benchmarks/robustness/hostile_round4_files.py), one row per
   suite with its attacks tried and held. `--round4-only` runs just this part.
6. What the fifth hostile run found (issue 67): every test in tests/**/test_round5_*.py whose
   docstring opens "Round 5, item N: ...", one row per item with its cases and how many held.
   `--round5` runs just this part (`--out docs/hostile_round5.json`).

    python benchmarks/robustness/hostile.py --quick          # a couple of minutes
    python benchmarks/robustness/hostile.py                  # the issue's counts (long on a shared 2-core box)
    python benchmarks/robustness/hostile.py --cheap-steps 20000 --swe-steps 2000 --browser-steps 500 --tasks 10000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import code_version, command  # noqa: E402

import gymnasium as gym
import numpy as np

import agentgym
from agentgym.core import INFO_KEYS
from agentgym.tasks.generation import mutate
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.validation import is_reserved

CHEAP_IDS = ["agentgym/Household-v0", "agentgym/WebShop-v0", "agentgym/ToolUse-v0", "agentgym/SearchQA-v0",
             "agentgym/TextWorld-v0"]
ROOT = Path(__file__).resolve().parents[2]


def hostile_action(rng: random.Random, admissible: list | None) -> str:
    kind = rng.randrange(16)
    if kind == 0:
        return "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randrange(0, 200)))
    if kind == 1:
        return "bash echo a\x00b" if rng.random() < 0.5 else "look\x00" + "x" * rng.randrange(10)
    if kind == 2:
        return "view README.md " + "9" * rng.randrange(4000, 6000)
    if kind == 3:
        return '{"name": "view", "arguments": {"path": "README.md", "start_line": ' + "9" * 5000 + "}}"
    if kind == 4:
        return "[" * rng.randrange(1000, 50000)
    if kind == 5:
        return "x" * rng.randrange(10000, 200000)
    if kind == 6:
        return rng.choice(["view ../../etc/passwd", "view /etc/shadow", "create ../../pwned\nx",
                           '{"name": "create", "arguments": {"path": "/tmp/pwned", "content": "x"}}',
                           "search[" + "%s%n" * 50 + "]", "click[" + "\u202e" * 20 + "]", "answer[]", "open[../../x]"])
    if kind == 7:
        return json.dumps({"name": rng.choice(["bash", "view", "str_replace", "create", "run_tests", "submit", "x"]),
                           "arguments": rng.choice([None, [], "", {"path": 5}, {"command": ["ls"]}, {"timeout": "nan"}])})
    if kind == 8:
        return rng.choice(["", " ", "\n\n", "\t", None, 12345, 1.5, b"bytes"])  # non-strings are str()-ed by step
    if kind == 9:
        return '[{"tool": "x", "args": ' + "{" * 3000 + "}]"
    if kind == 10:
        return "<action>" * 100 + "</action>"
    if kind == 11:
        return "bash " + rng.choice(["ls", "cat /etc/passwd", "echo hi > x.txt", "ln -s / root_link", "ln -s nowhere dangle",
                                     "python -c 'print(1)'", "submit"])
    return rng.choice(admissible) if admissible else rng.choice(["look", "inventory", "search[shampoo]", "submit"])


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> int:
    me, n = str(os.getpid()), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == me:
                        n += 1
            except (OSError, IndexError):
                pass
    return n


def _my_folders() -> set[str]:
    mine = f"agentgym-swe-{os.getpid()}."
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(mine)}


def hostile_steps(env_id: str, steps: int, seed: int = 0, env_kwargs: dict | None = None,
                  reset_every: int = 30) -> dict:
    rng = random.Random(seed)
    if env_id == "agentgym/SWE-v0":
        # the process's workspace reaper (one per process, for its lifetime) is not an env's leak
        from agentgym.envs.swe.workspace import start_reaper

        start_reaper(Path(tempfile.gettempdir()))
    fds, kids, folders = _fds(), _children(), _my_folders()
    exceptions, missing, done_steps = [], 0, 0
    start = time.perf_counter()
    env = gym.make(env_id, **(env_kwargs or {})).unwrapped
    try:
        info = None
        since_reset = reset_every
        while done_steps < steps:
            if info is None or since_reset >= reset_every:
                try:
                    _, info = env.reset(seed=rng.randrange(1 << 30))
                except Exception as exc:  # noqa: BLE001
                    exceptions.append(f"reset: {type(exc).__name__}: {str(exc)[:120]}")
                    info = None
                    done_steps += 1
                    continue
                since_reset = 0
            action = hostile_action(rng, info.get("admissible_actions"))
            try:
                _, _, terminated, truncated, info = env.step(action)
                missing += any(k not in info for k in INFO_KEYS)
                if terminated or truncated:
                    since_reset = reset_every
            except Exception as exc:  # noqa: BLE001
                exceptions.append(f"step: {type(exc).__name__}: {str(exc)[:120]}")
                since_reset = reset_every
            done_steps += 1
            since_reset += 1
    finally:
        env.close()
    time.sleep(0.2)
    return {"env": env_id, "steps": done_steps, "exceptions": len(exceptions), "examples": exceptions[:3],
            "missing_info": missing, "fds_left": max(0, _fds() - fds), "processes_left": max(0, _children() - kids),
            "folders_left": len(_my_folders() - folders), "seconds": round(time.perf_counter() - start, 1)}


# --- 2. the SWE attack list + escape suite ------------------------------------------------------
def pytest_rows(*paths: str, timeout: int = 1800) -> list[dict]:
    """One row per test case of the given test files: {"classname", "case", "result"}, the
    result "contained", "NOT contained" (failed or errored) or "skipped"."""
    xml = Path(tempfile.mkdtemp()) / "r.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *paths]
    subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if not xml.exists():
        return [{"classname": "", "case": " ".join(paths), "result": "NOT contained"}]  # pytest itself failed
    rows = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        status = "contained"
        if case.find("failure") is not None or case.find("error") is not None:
            status = "NOT contained"
        elif case.find("skipped") is not None:
            status = "skipped"
        rows.append({"classname": case.get("classname", ""), "case": case.get("name"), "result": status})
    return rows


def attack_table() -> list[dict]:
    return [{"suite": "issue 19" if "hostile" in r["classname"] else "escape suite", "attack": r["case"],
             "result": r["result"]} for r in pytest_rows("tests/swe/test_hostile.py", "tests/swe/test_escape.py")]


# --- 4. issue 38: the third hostile run's cases -------------------------------------------------
ISSUE38_SUITES = {
    "SWE grader (4 in-process hacks + always-equal, x 13 projects)": "tests/swe/test_grader_isolation.py",
    "SWE grader protocol (hostile peer)": "tests/swe/test_grader_remote.py",
    "SWE workspaces of killed workers": "tests/swe/test_workspace_reaper.py",
    "OpenEnv server exposure": "tests/openenv/test_exposure.py",
    "resume and checkpoints": "tests/trainers/test_checkpoint_safety.py",
    "YAML and config values": "tests/trainers/test_config_hostile.py",
    "viewer malformed lines": "tests/viewer/test_data_malformed.py",
    "WebShop browser pickling and temp folders": "tests/webshop/test_browser_leftovers.py",
}


def issue38_table() -> list[dict]:
    return [{"suite": suite, "case": r["case"], "result": r["result"]}
            for suite, path in ISSUE38_SUITES.items() for r in pytest_rows(path)]


# --- 5. issue 52: the fourth hostile run's cases ------------------------------------------------
ROUND4_MODULES = ("hostile_round4_graders", "hostile_round4_files")  # items 1-5, items 6-16


def round4_table() -> list[dict]:
    """Each round-4 module's `run()`: {"suites": [{"suite", "cases", "held", "not_held"}], ...}.
    Imported by name when run: a module not on this branch yet is reported as missing."""
    import importlib

    out = []
    for name in ROUND4_MODULES:
        try:
            module = importlib.import_module(f"benchmarks.robustness.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"benchmarks.robustness.{name}":
                raise
            out.append({"module": name, "missing": True, "suites": []})
            continue
        out.append({"module": name, **module.run()})
    return out


# --- 6. issues 67 and 69: the fifth hostile run's and the newcomer's cases -----------------------
ROUND5_ITEM = re.compile(r"Round 5, item (\d+)[^:]*:\s*(.*)")


def round5_attacks() -> dict[str, tuple[int, str]]:
    """{test node name: (item, attack)} of every test in tests/**/test_round5_*.py whose docstring's
    first line reads "Round 5, item N: what is attacked"."""
    import ast

    out = {}
    for path in sorted((ROOT / "tests").glob("**/test_round5_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                first = (ast.get_docstring(node) or "").strip().splitlines()[:1]
                if first and (match := ROUND5_ITEM.match(first[0])):
                    out[f"{path.relative_to(ROOT)}::{node.name}"] = (int(match.group(1)), match.group(2).strip())
    return out


def round5_table() -> list[dict]:
    """One row per item of the fifth hostile run (issue 67): its attack, the cases tried (one test
    each, parametrized cases counted apiece) and how many held (passed)."""
    attacks = round5_attacks()
    files = sorted({key.split("::")[0] for key in attacks})
    rows: dict[int, dict] = {}
    for r in pytest_rows(*files) if files else []:
        module = r["classname"].replace(".", "/")
        name = r["case"].split("[")[0]
        key = next((k for k in attacks if k.endswith(f"::{name}") and module.endswith(Path(k.split("::")[0]).stem)),
                   None)
        if key is None:
            continue
        item, attack = attacks[key]
        row = rows.setdefault(item, {"item": item, "attack": attack, "cases": 0, "held": 0, "not_held": []})
        row["cases"] += 1
        if r["result"] == "contained":
            row["held"] += 1
        else:
            row["not_held"].append(f"{key}: {r['result']}")
    return [rows[i] for i in sorted(rows)]


# --- 3. held-out contamination ------------------------------------------------------------------
def _retyped(params: dict) -> dict:
    out = {}
    for k, v in params.items():
        if isinstance(v, float) and v.is_integer():
            out[k] = int(v)
        elif isinstance(v, int) and not isinstance(v, bool) and k in ("closed_fraction", "price_upper"):
            out[k] = float(v)
        else:
            out[k] = v
    return out


def generated_tasks(space, n: int, rng: np.random.Generator) -> list[TaskSpec]:
    heldout = [t for name in space.split_names if name != "train" for t in space.split(name)]
    train = space.split("train")
    out: list[TaskSpec] = []
    cheap_sample = space.env_id != "agentgym/SWE-v0"  # SWE's sample runs the project's tests
    kwargs = {"agentgym/Household-v0": {"unseen": None}, "agentgym/WebShop-v0": {"heldout_products": None},
              "agentgym/SearchQA-v0": {"unseen": True}}.get(space.env_id, {})
    while len(out) < n:
        r = rng.random()
        if r < 0.4 and cheap_sample:
            try:
                out.append(space.sample(rng, **(kwargs if rng.random() < 0.5 else {})))
            except Exception:  # noqa: BLE001
                continue
        elif r < 0.55 and cheap_sample:
            try:
                out.append(mutate(space, train[int(rng.integers(len(train)))] if rng.random() < 0.5 else
                                  heldout[int(rng.integers(len(heldout)))], rng))
            except Exception:  # noqa: BLE001
                continue
        else:
            t = heldout[int(rng.integers(len(heldout)))] if rng.random() < 0.8 else train[int(rng.integers(len(train)))]
            how = int(rng.integers(4))
            if how == 0:
                out.append(TaskSpec(t.env_id, dict(t.params), int(rng.integers(1 << 30))))  # new seed
            elif how == 1:
                out.append(TaskSpec(rng.choice(["agentgym/WebShop-v0", t.env_id.split("/")[-1], "user/X-v0"]),
                                    dict(t.params), t.seed))  # relabelled
            elif how == 2:
                out.append(TaskSpec(t.env_id, _retyped(dict(t.params)), t.seed))  # re-typed numbers
            else:
                out.append(t)  # verbatim
    return out[:n]


def contamination(env_id: str, n: int, seed: int = 0) -> dict:
    from agentgym.tasks.generator import TaskGenerator
    from agentgym.tasks.pool import TaskPool
    from agentgym.tasks.spec import _normalized, canonical_json

    space = agentgym.get_task_space(env_id)
    gen = TaskGenerator(space, TaskPool(), seed=seed)
    held = [t for name in space.split_names if name != "train" for t in space.split(name)]
    held_ids = {t.task_id for t in held}

    def content(t):
        return canonical_json({"p": _normalized(dict(t.params)), "s": t.seed})

    held_content = {content(t) for t in held}
    tasks = generated_tasks(space, n, np.random.default_rng(seed))
    counts = {"generated": len(tasks), "admitted": 0, "by_id": 0, "by_content": 0, "by_region": 0,
              "heldout_offered": 0}
    for t in tasks:
        truth_id, truth_content = t.task_id in held_ids, content(t) in held_content
        try:
            truth_region = is_reserved(space, TaskSpec(space.env_id, dict(t.params), t.seed))
        except Exception:  # noqa: BLE001
            truth_region = False
        counts["heldout_offered"] += truth_id or truth_content or truth_region
        spec, reason = gen._canonical(t)
        if reason is None:
            reason = _gate(gen, spec)
        if reason != "admitted":
            continue
        counts["admitted"] += 1
        counts["by_id"] += truth_id or spec.task_id in held_ids
        counts["by_content"] += truth_content or content(spec) in held_content
        counts["by_region"] += truth_region
    return {"env": env_id, **counts}


def _gate(gen, spec) -> str:
    """The generator's admission checks up to (not including) the oracle run."""
    if spec.task_id in gen.heldout or spec.content_key in gen.heldout:
        return "heldout"
    try:
        if gen.reserved is not None and gen.reserved(spec):
            return "reserved"
    except (KeyError, TypeError, ValueError):
        return "invalid"
    return "admitted"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small counts (a few minutes)")
    ap.add_argument("--cheap-steps", type=int, default=100_000)
    ap.add_argument("--swe-steps", type=int, default=20_000)
    ap.add_argument("--browser-steps", type=int, default=20_000)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--skip-attacks", action="store_true")
    ap.add_argument("--issue38-only", action="store_true", help="only part 4 (the third hostile run's cases)")
    ap.add_argument("--round4-only", action="store_true", help="only part 5 (the fourth hostile run's cases)")
    ap.add_argument("--round5", action="store_true", help="only part 6 (the fifth hostile run's cases, issue 67)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.cheap_steps, args.swe_steps, args.browser_steps, args.tasks = 2000, 300, 100, 2000

    report = {"args": vars(args) | {"out": str(args.out)}, "hostile_steps": [], "attacks": [], "contamination": [],
              "issue38": [], "round4": [], "round5": []}
    if args.round5:
        report["round5"] = round5_table()
        print(f"{'item':>4}  {'cases':>5}  {'held':>4}  attack")
        for row in report["round5"]:
            print(f"{row['item']:>4}  {row['cases']:>5}  {row['held']:>4}  {row['attack']}")
            for case in row["not_held"]:
                print(f"{'':>17}NOT HELD {case}")
        if args.out:
            rows = report["round5"]
            version = code_version()
            args.out.write_text(json.dumps({"command": command(__file__, ["--round5", "--out", str(args.out)]),
                                            "code_version": version, "items": len(rows),
                                            "cases": sum(r["cases"] for r in rows),
                                            "held": sum(r["held"] for r in rows), "round5": rows}, indent=1) + "\n")
        return
    report["round4"] = round4_table()
    for part in report["round4"]:
        if part.get("missing"):
            print(json.dumps({"round4": part["module"], "missing": True}), flush=True)
        for suite in part["suites"]:
            print(json.dumps({"round4": suite["suite"], "cases": suite["cases"], "held": suite["held"],
                              "other": suite["not_held"]}), flush=True)
    if args.round4_only:
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))
        return
    report["issue38"] = issue38_table()
    for suite in ISSUE38_SUITES:
        rows = [r for r in report["issue38"] if r["suite"] == suite]
        bad = [r["case"] for r in rows if r["result"] != "contained"]
        print(json.dumps({"issue38": suite, "cases": len(rows), "contained": len(rows) - len(bad), "other": bad}),
              flush=True)
    if args.issue38_only:
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))
        return
    import shutil

    for env_id in CHEAP_IDS:
        if "TextWorld" in env_id:
            try:
                import textworld  # noqa: F401
            except ImportError:
                continue
        report["hostile_steps"].append(hostile_steps(env_id, args.cheap_steps))
        print(json.dumps(report["hostile_steps"][-1]), flush=True)
    report["hostile_steps"].append(hostile_steps("agentgym/SWE-v0", args.swe_steps,
                                                 env_kwargs={"max_steps": 10}, reset_every=10))
    print(json.dumps(report["hostile_steps"][-1]), flush=True)
    if shutil.which("chromium"):
        report["hostile_steps"].append(hostile_steps("agentgym/WebShop-Browser-v0", args.browser_steps))
        print(json.dumps(report["hostile_steps"][-1]), flush=True)
    if not args.skip_attacks:
        report["attacks"] = attack_table()
        bad = [r for r in report["attacks"] if r["result"] != "contained"]
        print(f"attacks: {len(report['attacks'])} run, {len(bad)} not contained/skipped: {bad}", flush=True)
    for env_id in ["agentgym/Household-v0", "agentgym/WebShop-v0", "agentgym/ToolUse-v0", "agentgym/SearchQA-v0",
                   "agentgym/SWE-v0"]:
        report["contamination"].append(contamination(env_id, args.tasks))
        print(json.dumps(report["contamination"][-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
