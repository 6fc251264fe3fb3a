"""`agentgym serve ENV_ID`: the CLI side of the OpenEnv server (imports openenv only when run)."""

from __future__ import annotations

import json
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        env: str = typer.Argument(..., help="environment id, e.g. agentgym/Household-v0"),
        port: int = typer.Option(8000, help="TCP port"),
        host: str = typer.Option("127.0.0.1", help="interface to bind (default: loopback only)"),
        max_sessions: int = typer.Option(16, help="concurrent sessions (one environment instance each)"),
        env_kwargs: Optional[str] = typer.Option(None, help="JSON dict of keyword arguments for gym.make"),
        idle_timeout: float = typer.Option(300.0, help="seconds after which a session nobody is connected to is freed"),
        allow_remote: bool = typer.Option(False, "--allow-remote", help="allow --host beyond loopback and any Host "
                                          "header (anyone who reaches the port can play, and run SWE commands)"),
        allow_origin: Optional[List[str]] = typer.Option(None, "--allow-origin", help="a web page origin that may "
                                                         "connect besides loopback pages (repeatable)"),
        serve_heldout: bool = typer.Option(False, "--serve-heldout", help="play held-out tasks for remote clients "
                                           "too (by default only this machine's clients may)"),
    ):
        """Serve an environment with OpenEnv's server (WebSocket /ws, /health, /schema, task routes)."""
        from agentgym.errors import ConfigError  # lazy: `agentgym --help` stays fast
        from agentgym.registration import check_env_id

        env_id = check_env_id(env)  # an unknown id fails here, before openenv is even imported
        try:
            kwargs = json.loads(env_kwargs) if env_kwargs else {}
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--env-kwargs is not valid JSON: {exc}") from None
        if not isinstance(kwargs, dict):
            raise ConfigError("--env-kwargs must be a JSON object")
        from agentgym.hosts import check_bind, check_host

        # before openenv is imported (seconds: it imports gradio): one line with the real cause
        check_host(host, allow_remote, "serve")
        check_bind(host, port)
        from agentgym.integrations.openenv_server import serve  # lazy: `agentgym --help` stays fast

        def ready():
            print(f"serving {env_id} with OpenEnv at http://{host}:{port} "
                  f"(ws://{host}:{port}/ws, /health; up to {max_sessions} sessions)", flush=True)

        serve(env_id, host=host, port=port, max_sessions=max_sessions, env_kwargs=kwargs, on_ready=ready,
              idle_timeout_s=idle_timeout, allow_remote=allow_remote, allowed_origins=tuple(allow_origin or ()),
              serve_heldout=serve_heldout)
