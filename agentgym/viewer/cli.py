"""`agentgym view`: registered on the main CLI by `register(app)`; starlette/uvicorn load only when run."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer


def view_command(
    paths: List[Path] = typer.Argument(..., help="run dirs (runs/NAME), `agentgym eval --out` folders or trajectory "
                                                 "JSONL files; give two runs to compare their evaluations"),
    port: int = typer.Option(8765, "--port", "-p", help="port to listen on (0: any free port)"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (loopback unless --allow-remote)"),
    allow_remote: bool = typer.Option(False, "--allow-remote",
                                      help="allow a non-loopback --host: anyone who reaches it reads the trajectories"),
):
    """Browse runs in the browser (http://127.0.0.1:8765/): episodes, advantages, evaluations, curves.

    Iterations, groups, episodes, steps with their advantages and GiGPO anchor groups, tree rollouts'
    branches under the steps they start from, evaluation reports side by side, learning curves."""
    from rich.console import Console

    from agentgym.viewer.app import make_server  # lazy: `agentgym --help` stays fast

    server, sock, url = make_server(paths, host=host, port=port, allow_remote=allow_remote)
    Console().print(f"agentgym view: {url}  (Ctrl-C to stop)", highlight=False, markup=False)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
