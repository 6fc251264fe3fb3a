"""What the benchmarks share.

- provenance: what every results file records beside its figures (the command, the code version,
  torch threads, the machine's load, CPU seconds);
- jobs: long experiments as tables of resumable jobs, and the arms they compare (warm start, RL,
  SFT that resumes exactly, evaluation, the jobs of an equal-compute comparison);
- record_run: a finished `agentgym train` run's results file and the figures block the docs quote.
"""
