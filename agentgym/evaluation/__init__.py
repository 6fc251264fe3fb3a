"""Evaluation on held-out tasks: success with confidence intervals, pass@k, per-category tables,
paired gains between two evaluations (evaluate.py, stats.py, report.py), and `agentgym eval`
(cli.py). It trains nothing: trainers use it, it never imports them.

The functions: `from agentgym.evaluation.evaluate import evaluate, run_eval, EvalRequest`
(`from agentgym.evaluation import evaluate` is the module of that name)."""
