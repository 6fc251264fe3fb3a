"""Briefing-v0: open-ended written reports over the tool-use apps, graded by a rubric."""
