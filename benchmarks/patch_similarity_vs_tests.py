"""How SWE-RL's patch-similarity reward agrees with the test verdict on SWE-v0's bundled tasks.

For each task, five patches are played in the env with reward="both" (tests and similarity in one
episode, the reference fix compared on the host):

    oracle      the reference fix (undo the injected bug)
    oracle+doc  the fix plus a comment line elsewhere in the file (tests pass, text differs)
    touch       a comment added to the buggy line, bug left in (tests fail, text close)
    other_bug   a second, different bug injected in the same file, original bug left (tests fail)
    none        no change (similarity -1)

and the script prints, per kind, the mean similarity and the tests' success rate, then the
Pearson correlation of similarity with the tests' score and with success, and the AUC of the
similarity as a predictor of success (the chance a passing patch outscores a failing one).

    python benchmarks/patch_similarity_vs_tests.py --tasks 40          # ~200 graded episodes
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.repos import repo_path
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.taskgen import candidate_mutations
from agentgym.envs.swe.mutation import apply_mutation
from agentgym.envs.swe.tools import format_call

KINDS = ("oracle", "oracle+doc", "touch", "other_bug", "none")


def patches(task) -> dict[str, list[str]]:
    p = task.params
    fixed_source = (repo_path(p["repo"]) / p["file"]).read_text()
    submit = format_call("submit")
    out = {
        "oracle": [format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["before"]), submit],
        "oracle+doc": [format_call("create", path=p["file"], content="# reviewed\n" + fixed_source), submit],
        "touch": [format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["after"] + "  # suspicious"),
                  submit],
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--split", default="train")
    args = ap.parse_args()
    space = SWETaskSpace()
    tasks = space.split(args.split)[: args.tasks]
    rows = []
    t0 = time.perf_counter()
    with SWEEnv(reward="both") as env:
        for task in tasks:
            for kind, actions in patches(task).items():
                info = play(env, task, actions)
                rows.append((kind, info["patch_similarity"], info["score"], info["success"]))
    seconds = time.perf_counter() - t0
    print(f"{len(tasks)} tasks of {args.split}, {len(rows)} graded episodes in {seconds:.0f} s")
    print("| patch | n | mean similarity | tests success |")
    print("| --- | --- | --- | --- |")
    for kind in KINDS:
        sel = [r for r in rows if r[0] == kind]
        if sel:
            print(f"| {kind} | {len(sel)} | {np.mean([r[1] for r in sel]):.3f} | {np.mean([r[3] for r in sel]):.2f} |")
    sim = np.array([r[1] for r in rows])
    score = np.array([r[2] for r in rows])
    success = np.array([r[3] for r in rows], dtype=bool)
    print(f"Pearson(similarity, tests score) = {np.corrcoef(sim, score)[0, 1]:.3f}")
    print(f"Pearson(similarity, tests success) = {np.corrcoef(sim, success.astype(float))[0, 1]:.3f}")
    print(f"AUC of similarity for tests success = {auc(sim, success):.3f}")
    nonneg = sim >= 0
    print(f"without the -1 (no patch) rows: Pearson(similarity, success) = "
          f"{np.corrcoef(sim[nonneg], success[nonneg].astype(float))[0, 1]:.3f}, "
          f"AUC = {auc(sim[nonneg], success[nonneg]):.3f}")


if __name__ == "__main__":
    main()
