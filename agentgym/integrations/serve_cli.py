"""`agentgym serve ENV_ID`: the CLI side of the OpenEnv server (imports openenv only when run)."""

from __future__ import annotations

import json
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        env: str = typer.Argument(..., help="environment id, e.g. agentgym/Household-v0"),
        port: int = typer.Option(8000, help="TCP port"),
        host: str = typer.Option("127.0.0.1", help="interface to bind (default: loopback only)"),
        max_sessions: int = typer.Option(16, help="concurrent sessions (one environment instance each)"),
        env_kwargs: Optional[str] = typer.Option(None, help="JSON dict of keyword arguments for gym.make"),
    ):
        """Serve an environment with OpenEnv's server (WebSocket /ws, /health, /schema, task routes)."""
        from agentgym.errors import ConfigError
        from agentgym.registration import check_env_id

        env_id = check_env_id(env)  # an unknown id fails here, before openenv is even imported
        try:
            kwargs = json.loads(env_kwargs) if env_kwargs else {}
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--env-kwargs is not valid JSON: {exc}") from None
        if not isinstance(kwargs, dict):
            raise ConfigError("--env-kwargs must be a JSON object")
        from agentgym.integrations.openenv_server import serve

        def ready():
            print(f"serving {env_id} with OpenEnv at http://{host}:{port} "
                  f"(ws://{host}:{port}/ws, /health; up to {max_sessions} sessions)", flush=True)

        serve(env_id, host=host, port=port, max_sessions=max_sessions, env_kwargs=kwargs, on_ready=ready)
