"""Scripts that measure agentgym, grouped by what they measure (benchmarks/README.md lists each).

Run one from the repository root, `python benchmarks/<group>/<name>.py`. A script that imports
another (or the shared harness, benchmarks/harness) puts the repository root on sys.path first, so
that every such import is `benchmarks.<group>.<name>`, the same whether the script runs or a test
imports it.
"""
