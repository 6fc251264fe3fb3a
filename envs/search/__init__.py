"""SearchQA: multi-hop question answering by searching an encyclopedia (Search-R1 style).

Modules: world (the generated fictional world), corpus (its documents and user JSONL corpora),
questions (1-4 hop question specs), index (BM25 with bm25s, cached), dataset (corpus + question
sources), task_space (sampling, mutation, oracle, splits), env (SearchQAEnv), hotpotqa (converter).
Nothing heavy is imported here: `import agentgym` stays light.
"""
