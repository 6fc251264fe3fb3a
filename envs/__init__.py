"""Built-in environment families. Each sub-package owns its generator, verifier, oracle and
split manifests. Their ids are registered by agentgym/builtin_envs.py without importing them."""
