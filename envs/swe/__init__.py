"""SWE-v0: fix injected bugs in small Python projects through sandboxed tools.

Modules: env (SWEEnv), space (task space and oracle), tools (actions and file tools),
sandbox / sandbox_bwrap / sandbox_docker / sandbox_local (backends), testing (pytest runs and
grading), mutation and taskgen (offline bug injection and validation), repos (the shipped
projects under data/repos). See README.md in this folder.
"""
