"""`agentgym gateway`: serve a model (or a training run) as an OpenAI-compatible API on loopback."""

from __future__ import annotations

from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("gateway")
    def gateway_command(
        model: Optional[str] = typer.Option(None, "--model", help="serve this model folder (no training)"),
        train: Optional[str] = typer.Option(None, "--train", help="a training preset or config file: serve its "
                                            "policy and train it on the episodes your program reports (run dir: runs/<preset>-gateway, "
                                            "or run_dir=DIR)"),
        overrides: Optional[List[str]] = typer.Argument(None, help="config overrides for --train, key=value"),
        episodes_per_iter: int = typer.Option(48, help="--train: episodes (rewards reported) per update"),
        serve_during_update: bool = typer.Option(False, help="--train: answer calls during an update with the "
                                                 "previous weights (staleness recorded) instead of making them wait"),
        model_name: str = typer.Option("agentgym", help="the model name clients ask for"),
        engine: str = typer.Option("hf", help="--model: hf, or vllm where vLLM is installed"),
        host: str = typer.Option("127.0.0.1", help="interface to bind (default: loopback only)"),
        port: int = typer.Option(8100, help="TCP port"),
        api_key: Optional[str] = typer.Option(None, help="a bearer token every request must carry"),
        allow_remote: bool = typer.Option(False, "--allow-remote", help="allow --host beyond loopback"),
        max_tokens: int = typer.Option(256, help="--model: max_tokens of a request that gives none"),
        threads: int = typer.Option(1, help="torch CPU threads"),
        gather_s: Optional[float] = typer.Option(None, help="a batch waits for every open episode's next call, but "
                                                 "samples once no call has come for this many seconds (default 0.25)"),
        max_body_mb: float = typer.Option(4.0, help="a request body over this many MiB is refused (413) unread"),
    ):
        """Serve the OpenAI API backed by the policy, recording each episode's tokens; --train trains on them.

        /v1/chat/completions and /v1/models; every episode's exact tokens are recorded, and with --train
        the policy trains on them as they come (docs/gateway.md)."""
        from agentgym.errors import ConfigError
        from agentgym.hosts import check_bind, check_host
        from agentgym.integrations.gateway.app import GatewayConfig

        if (model is None) == (train is None):
            raise ConfigError("give --model PATH (serve a model) or --train PRESET (serve and train its policy)")
        if gather_s is not None and gather_s < 0:
            raise ConfigError(f"--gather-s must be >= 0 seconds, got {gather_s}")
        if max_body_mb <= 0:
            raise ConfigError(f"--max-body-mb must be above 0, got {max_body_mb}")
        cfg = GatewayConfig(host=host, port=port, api_key=api_key, allow_remote=allow_remote,
                            max_body_bytes=int(max_body_mb * 2**20),
                            **({} if gather_s is None else {"gather_s": gather_s}))
        check_host(cfg.host, cfg.allow_remote, "gateway")
        check_bind(cfg.host, cfg.port)  # a taken port is one line, before a model loads
        if train is not None:
            from agentgym.integrations.gateway.training import train_through_gateway
            from agentgym.trainers.config import load_config
            from agentgym.trainers.training import heldout_change

            train_cfg = load_config(train, list(overrides or []))
            summary = train_through_gateway(train_cfg, cfg, episodes_per_iter, model_name, serve_during_update)
            print(f"trained {summary['iterations']} iterations in {summary['seconds']:.0f} s: held-out success "
                  f"{heldout_change(summary)}; {summary['run_dir']} (agentgym eval {summary['run_dir']})")
            return
        from agentgym.policies.model_files import check_model_path

        if engine not in ("hf", "vllm"):
            raise ConfigError(f"--engine must be hf or vllm, got {engine!r}")
        check_model_path(model, "--model")  # one line before torch and the model load
        import torch

        from agentgym.integrations.gateway.app import serve
        from agentgym.integrations.gateway.recorder import Recorder

        torch.set_num_threads(threads)
        if engine == "vllm":
            from agentgym.policies.vllm_engine import VLLMPolicy

            policy = VLLMPolicy(model)
        else:
            from agentgym.policies.hf import HFPolicy

            policy = HFPolicy(model)
        context = getattr(getattr(getattr(policy, "model", None), "config", None), "max_position_embeddings", None)
        recorder = Recorder(policy, model_names=(model_name,), context_len=context, default_max_tokens=max_tokens)
        serve(recorder, cfg, on_ready=lambda: print(f"gateway serving {model_name!r} at http://{host}:{port}/v1 "
                                                    f"(episodes: POST http://{host}:{port}/episodes)", flush=True))
