"""Built-in environment families. Each sub-package owns its generator, verifier, oracle and
split manifests. This table registers their ids without importing them."""

BUILTIN_ENVS: list[dict] = [
    dict(
        id="Household-v0",
        entry_point="agentgym.envs.household.env:HouseholdEnv",
        max_episode_steps=50,
        description="ALFWorld-like household tasks: find, clean/heat/cool, place objects",
    ),
]
