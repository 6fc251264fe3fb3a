"""Bridges to other training stacks, each behind its own extra and imported lazily:

- `agentgym.integrations.openenv_server`: serve any registered env with OpenEnv's own server
  (`agentgym serve`, extra `agentgym-credit[openenv]`);
- `agentgym.integrations.openenv_client`: any OpenEnv server as a TextEnv
  (`gym.make("agentgym/OpenEnv-v0", base_url=...)`);
- `agentgym.integrations.trl`: multi-turn GRPO with TRL's `GRPOTrainer` on agentgym envs
  (extra `agentgym-credit[trl]`).
"""
