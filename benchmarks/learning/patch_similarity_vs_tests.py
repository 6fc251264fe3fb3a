"""How SWE-RL's patch-similarity reward agrees with the test verdict on SWE-v0's bundled tasks.

For each task, six patches are played in the env with reward="both" (tests and similarity in one
episode, the reference fix compared on the host):

    oracle      the reference fix (undo the injected bug)
    oracle+doc  the fix plus a comment line elsewhere in the file (tests pass, text differs)
    touch       a comment added to the buggy line, bug left in (tests fail, text close)
    delete      the buggy line deleted (tests fail; on the diffs' text it scored 0.93)
    other_bug   a second, different bug injected in the same file, original bug left (tests fail)
    none        no change (similarity -1)

and the script prints, per kind, the mean similarity and the tests' success rate, then the
Pearson correlation of similarity with the tests' score and with success, and the AUC of the
similarity as a predictor of success (the chance a passing patch outscores a failing one).

    python benchmarks/learning/patch_similarity_vs_tests.py --tasks 40          # 240 graded episodes
    python benchmarks/learning/patch_similarity_vs_tests.py --split all --out docs/patch_similarity.json

--split all takes every bundled split (train, heldout, heldout_unseen); --out writes the summary and
every episode's row as JSON; --budget-min stops starting new tasks after that many minutes (the
tasks played are recorded). A recorded run can be brought up to date without replaying it:
--rescore recomputes every row's similarity with the current reward (the tests' verdicts do not
depend on it), and --kinds K --merge FILE plays only kind K on the tasks and adds its rows to FILE:

    python benchmarks/learning/patch_similarity_vs_tests.py --rescore docs/patch_similarity.json
    python benchmarks/learning/patch_similarity_vs_tests.py --split all --kinds delete --merge docs/patch_similarity.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.repos import repo_path
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.taskgen import candidate_mutations
from agentgym.envs.swe.mutation import apply_mutation
from agentgym.envs.swe.tools import format_call
from agentgym.errors import SplitFileError

KINDS = ("oracle", "oracle+doc", "touch", "delete", "other_bug", "none")


def patches(task) -> dict[str, list[str]]:
    p = task.params
    fixed_source = (repo_path(p["repo"]) / p["file"]).read_text()
    submit = format_call("submit")
    out = {
        "oracle": [format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["before"]), submit],
        "oracle+doc": [format_call("create", path=p["file"], content="# reviewed\n" + fixed_source), submit],
        "touch": [format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["after"] + "  # suspicious"),
                  submit],
        "delete": [format_call("str_replace", path=p["file"], old_str=p["after"] + "\n", new_str=""), submit],
        "none": [submit],
    }
    others = [m for m in candidate_mutations(p["repo"]) if m.file == p["file"] and m.line != p["line"]]
    for m in others:
        try:
            buggy_twice = apply_mutation(fixed_source, m)
        except ValueError:
            continue
        if buggy_twice.count(p["before"]) == 1:
            out["other_bug"] = [format_call("create", path=p["file"],
                                            content=buggy_twice.replace(p["before"], p["after"], 1)), submit]
            break
    return out


def similarity_on_host(task, actions: list[str]) -> float:
    """The similarity the env would give `actions` (one edit of the task's file, or none), computed
    without a sandbox: the patch is the file's diff, the reference the fix's."""
    from agentgym.rewards.patch import file_patch, patch_similarity

    p = task.params
    fixed = (repo_path(p["repo"]) / p["file"]).read_text()
    buggy = fixed.replace(p["before"], p["after"], 1)
    edit = json.loads(actions[0])["arguments"] if len(actions) > 1 else None
    if edit is None:
        new = buggy
    elif "content" in edit:
        new = edit["content"]
    else:
        new = buggy.replace(edit["old_str"], edit["new_str"], 1)
    predicted = file_patch(p["file"], buggy.encode(), new.encode())
    return patch_similarity(predicted, file_patch(p["file"], buggy.encode(), fixed.encode())).score


def rescore(path: Path) -> None:
    """Recompute every row's similarity with the current reward, keeping the tests' verdicts of the
    recorded episodes (they do not depend on the similarity): `--rescore docs/patch_similarity.json`."""
    record = json.loads(path.read_text())
    space = SWETaskSpace()
    by_id = {t.task_id: t for name in ("train", "heldout", "heldout_unseen") for t in space.split(name)}
    made: dict[str, dict[str, list[str]]] = {}
    for row in record["rows"]:
        task = by_id[row["task_id"]]
        if task.task_id not in made:
            made[task.task_id] = patches(task)
        row["similarity"] = similarity_on_host(task, made[task.task_id][row["kind"]])
    rows = [(r["kind"], r["similarity"], r["tests_score"], r["tests_success"]) for r in record["rows"]]
    record.update(summarize(rows), rescored_with="python " + " ".join(sys.argv))
    path.write_text(dump(record))
    for kind, k in record["kinds"].items():
        print(f"| {kind} | {k['n']} | {k['mean_similarity']:.3f} | {k['tests_pass_rate']:.2f} |")
    print(f"Pearson(similarity, tests success) = {record['pearson_similarity_tests_success']:.3f}, "
          f"AUC = {record['auc_similarity_for_success']:.3f}; without the -1 rows: "
          f"{record['without_no_patch']['pearson_similarity_tests_success']:.3f}, "
          f"{record['without_no_patch']['auc_similarity_for_success']:.3f}")


def merge(path: Path, episodes: list[dict]) -> None:
    """Add `episodes` to the recorded run at `path`, replacing its rows of the same task and kind,
    and recompute its summary."""
    record = json.loads(path.read_text())
    new = {(e["task_id"], e["kind"]) for e in episodes}
    record["rows"] = [r for r in record["rows"] if (r["task_id"], r["kind"]) not in new] + episodes
    rows = [(r["kind"], r["similarity"], r["tests_score"], r["tests_success"]) for r in record["rows"]]
    record.update(summarize(rows), episodes=len(rows))
    record["merged_with"] = record.get("merged_with", []) + ["python " + " ".join(sys.argv)]
    path.write_text(dump(record))
    print(f"merged {len(episodes)} rows into {path} ({len(rows)} rows)")


def play(env, task, actions) -> dict:
    env.reset(options={"task": task})
    for a in actions:
        _, reward, term, trunc, info = env.step(a)
        if term or trunc:
            return info
    raise RuntimeError("episode did not end")


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    pos, neg = scores[labels], scores[~labels]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def summarize(rows: list[tuple]) -> dict:
    """rows: (kind, similarity, tests score, tests success) -> per kind and overall figures."""
    kinds = {}
    for kind in KINDS:
        sel = [r for r in rows if r[0] == kind]
        if sel:
            kinds[kind] = {"n": len(sel), "mean_similarity": float(np.mean([r[1] for r in sel])),
                           "tests_pass_rate": float(np.mean([r[3] for r in sel]))}
    sim = np.array([r[1] for r in rows])
    score = np.array([r[2] for r in rows])
    success = np.array([r[3] for r in rows], dtype=bool)
    nonneg = sim >= 0
    return {"kinds": kinds,
            "pearson_similarity_tests_score": float(np.corrcoef(sim, score)[0, 1]),
            "pearson_similarity_tests_success": float(np.corrcoef(sim, success.astype(float))[0, 1]),
            "auc_similarity_for_success": auc(sim, success),
            "without_no_patch": {"pearson_similarity_tests_success":
                                 float(np.corrcoef(sim[nonneg], success[nonneg].astype(float))[0, 1]),
                                 "auc_similarity_for_success": auc(sim[nonneg], success[nonneg])}}


def dump(record: dict) -> str:
    """The record as JSON, the summary indented and each episode's row on one line."""
    head = json.dumps({k: v for k, v in record.items() if k != "rows"}, indent=1)
    rows = ",\n  ".join(json.dumps(r) for r in record["rows"])
    return head[:-2] + ',\n "rows": [\n  ' + rows + "\n ]\n}\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=None, help="the first N tasks of the split(s) (default: all)")
    ap.add_argument("--split", default="train", help="a split name, or 'all' for every bundled split")
    ap.add_argument("--out", type=Path, default=None, help="write the figures and every episode's row as JSON")
    ap.add_argument("--budget-min", type=float, default=None, help="start no new task after this many minutes")
    ap.add_argument("--rescore", type=Path, default=None,
                    help="recompute the similarity of a recorded run's rows (tests' verdicts kept) and exit")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"the patches to play, of {', '.join(KINDS)}")
    ap.add_argument("--merge", type=Path, default=None,
                    help="add the rows played to this recorded run (replacing its rows of the same task and kind)")
    args = ap.parse_args()
    if args.rescore:
        return rescore(args.rescore)
    kinds = args.kinds.split(",")
    if not set(kinds) <= set(KINDS):
        raise SystemExit(f"--kinds: unknown {', '.join(sorted(set(kinds) - set(KINDS)))}; choose from {', '.join(KINDS)}")
    space = SWETaskSpace()
    splits = ("train", "heldout", "heldout_unseen") if args.split == "all" else (args.split,)
    try:
        tasks = [(name, t) for name in splits for t in space.split(name)]
    except SplitFileError as exc:
        raise SystemExit(f"{exc}, or all") from None
    available = len(tasks)
    tasks = tasks[: args.tasks] if args.tasks else tasks
    rows, episodes = [], []
    t0 = time.perf_counter()
    with SWEEnv(reward="both") as env:
        for split, task in tasks:
            if args.budget_min is not None and time.perf_counter() - t0 > 60 * args.budget_min:
                break
            for kind, actions in patches(task).items():
                if kind not in kinds:
                    continue
                info = play(env, task, actions)
                rows.append((kind, info["patch_similarity"], info["score"], info["success"]))
                episodes.append({"split": split, "task_id": task.task_id, "kind": kind,
                                 "similarity": info["patch_similarity"], "tests_score": info["score"],
                                 "tests_success": bool(info["success"])})
    seconds = time.perf_counter() - t0
    played = len({(e["split"], e["task_id"]) for e in episodes})
    summary = summarize(rows)
    print(f"{played} tasks of {args.split} ({available} available), {len(rows)} graded episodes in {seconds:.0f} s")
    print("| patch | n | mean similarity | tests success |")
    print("| --- | --- | --- | --- |")
    for kind, k in summary["kinds"].items():
        print(f"| {kind} | {k['n']} | {k['mean_similarity']:.3f} | {k['tests_pass_rate']:.2f} |")
    print(f"Pearson(similarity, tests score) = {summary['pearson_similarity_tests_score']:.3f}")
    print(f"Pearson(similarity, tests success) = {summary['pearson_similarity_tests_success']:.3f}")
    print(f"AUC of similarity for tests success = {summary['auc_similarity_for_success']:.3f}")
    wo = summary["without_no_patch"]
    print(f"without the -1 (no patch) rows: Pearson(similarity, success) = "
          f"{wo['pearson_similarity_tests_success']:.3f}, AUC = {wo['auc_similarity_for_success']:.3f}")
    if args.merge:
        merge(args.merge, episodes)
    if args.out:
        per_split = {name: len({e["task_id"] for e in episodes if e["split"] == name}) for name in splits}
        record = {"command": "python " + " ".join(sys.argv), "split": args.split, "tasks_available": available,
                  "tasks_played": played, "tasks_per_split": per_split, "episodes": len(rows),
                  "seconds": round(seconds, 1), **summary, "rows": episodes}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dump(record))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
