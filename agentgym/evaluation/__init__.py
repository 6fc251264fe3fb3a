"""Evaluation on held-out tasks: success with confidence intervals, pass@k, per-category tables,
paired gains between two evaluations (evaluate.py, stats.py, report.py), and `agentgym eval`
(cli.py). It trains nothing: trainers use it, it never imports them."""
