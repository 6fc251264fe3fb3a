"""`agentgym view`: a local web page to browse what the agent did (runs, iterations, groups,
episodes, steps with their advantages and GiGPO anchor groups, tree rollouts as trees) and a run's
learning curves.

Plain HTML/CSS/JS shipped in `static/` (no build step, no CDN), served by Starlette/uvicorn (the
`web` extra). See `agentgym.viewer.app.serve`.
"""
