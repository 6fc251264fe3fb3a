"""`agentgym gateway`: an OpenAI-compatible server backed by the policy being trained, which records
the exact tokens of every call of a user's own agent program and trains on them (docs/gateway.md).

    chat_format.py   OpenAI messages and tools <-> the chat template's plain messages (pure)
    recorder.py      episodes, token in / token out across calls, trajectories (no HTTP)
    app.py           the Starlette app: routes, OpenAI error objects, batching, streaming
    training.py      the trainer's batch producer when the user's program plays the episodes
    cli.py           `agentgym gateway`
"""
