"""SearchQA figures: corpus and index build times, query latency on the full corpus, env steps/s.

    python benchmarks/envs/search_qa.py [--quick]

Reference measured in the same run: bm25s's own pipeline (bm25s.tokenize + BM25.index, and
bm25s.tokenize + BM25.retrieve per query) on the same documents; our index feeds bm25s token ids
directly and scores queries through its score matrix. Target: median query latency <= 5 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np


def _ms(seconds: list[float]) -> tuple[float, float]:
    return statistics.median(seconds) * 1e3, float(np.percentile(seconds, 95)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer queries and episodes")
    args = parser.parse_args()
    n_queries, n_episodes = (300, 150) if args.quick else (2000, 1000)

    import bm25s

    from agentgym.envs.search.corpus import render_corpus
    from agentgym.envs.search.env import SearchQAEnv
    from agentgym.envs.search.index import SearchIndex
    from agentgym.envs.search.world import generate_world

    t = time.perf_counter()
    world = generate_world.__wrapped__(0)
    t_world = time.perf_counter() - t
    t = time.perf_counter()
    docs = render_corpus(world)
    t_render = time.perf_counter() - t
    words = sum(len(d.text.split()) for d in docs)
    print(f"corpus: {len(docs)} documents, {words / 1e6:.2f} M words; world {t_world:.2f} s, render {t_render:.2f} s")

    t, c = time.perf_counter(), time.process_time()
    index = SearchIndex.build(docs)
    t_build, c_build = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    reference = bm25s.BM25()
    reference.index(bm25s.tokenize([f"{d.title} {d.title} {d.text}" for d in docs], show_progress=False),
                    show_progress=False)
    t_ref_build = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        index.retriever.save(tmp, show_progress=False)
        t = time.perf_counter()
        bm25s.BM25.load(tmp, show_progress=False)
        t_load = time.perf_counter() - t
    print(f"index build: {t_build:.2f} s wall, {c_build:.2f} s CPU (bm25s tokenize+index reference "
          f"{t_ref_build:.2f} s, ratio {t_build / t_ref_build:.2f}x); load from disk cache {t_load * 1e3:.0f} ms")

    rng = np.random.default_rng(0)
    ents = list(world.entities.values())
    queries = []
    for i in range(n_queries):
        e = ents[int(rng.integers(len(ents)))]
        # half entity titles (the oracle's queries), half free-text questions about attributes
        queries.append(e.title if i % 2 == 0 else f"{e.name} {' '.join(str(v) for v in e.attrs.values())} founded born")
    ours, ours_cpu, ref = [], [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        index.search(q, 5)
        ours.append(time.perf_counter() - t)
        ours_cpu.append(time.process_time() - c)
        t = time.perf_counter()
        reference.retrieve(bm25s.tokenize([q], show_progress=False), k=5, show_progress=False)
        ref.append(time.perf_counter() - t)
    med, p95 = _ms(ours)
    cpu_med, cpu_p95 = _ms(ours_cpu)  # CPU time: what the query costs when the machine is shared
    ref_med, ref_p95 = _ms(ref)
    verdict = "met" if med <= 5 else "MISSED"
    print(f"query latency on the full corpus ({n_queries} queries, top-5): median {med:.3f} ms, p95 {p95:.3f} ms "
          f"(CPU time median {cpu_med:.3f} ms, p95 {cpu_p95:.3f} ms; target <= 5 ms: {verdict}); "
          f"bm25s retrieve reference median {ref_med:.3f} ms, p95 {ref_p95:.3f} ms; speed-up {ref_med / med:.1f}x")

    env = SearchQAEnv()
    space = env.task_space
    env.reset(options={"task": space.split("train")[0]})  # builds/loads the env's index outside the timing
    tasks = space.split("train")
    steps, search_steps, t_search = 0, 0, 0.0
    solved = 0
    t, c = time.perf_counter(), time.process_time()
    for i in range(n_episodes):
        task = tasks[i % len(tasks)]
        env.reset(options={"task": task})
        for action in space.solve(task):
            t0 = time.perf_counter()
            _, _, terminated, _, info = env.step(action)
            if action.startswith("search["):
                search_steps += 1
                t_search += time.perf_counter() - t0
            steps += 1
        solved += info["success"]
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    print(f"env: {steps / elapsed:.0f} steps/s ({steps / cpu:.0f} per CPU second) over {n_episodes} oracle episodes ({steps} steps incl. resets; "
          f"oracle success {solved}/{n_episodes}); search step incl. snippets "
          f"{t_search / search_steps * 1e3:.2f} ms mean")
    rand = np.random.default_rng(1)
    junk = ["look", "search[]", "open[nothing]", "answer[]", "search[harbour]", "open[per-00001]"]
    env.reset(options={"task": tasks[0]})
    t, c = time.perf_counter(), time.process_time()
    n = 2000 if not args.quick else 500
    for _ in range(n):
        env.step(junk[int(rand.integers(len(junk)))])
    print(f"env: {n / (time.perf_counter() - t):.0f} steps/s ({n / (time.process_time() - c):.0f} per CPU second) "
          "on random actions")


if __name__ == "__main__":
    main()
