"""ALFWorld's real engine (agentgym/ALFWorld-v0, extra `alfworld`): TextWorld's PDDL backend with
alfworld's wrappers, on games generated from alfworld's floor plans or on the official games."""

__all__ = ["ALFWorldEnv", "ALFWorldTaskSpace"]


def __getattr__(name: str):
    # Lazy: importing the package must not need the extra.
    if name == "ALFWorldEnv":
        from agentgym.envs.alfworld.env import ALFWorldEnv  # lazy: a submodule, the package imports light

        return ALFWorldEnv
    if name == "ALFWorldTaskSpace":
        from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace  # lazy: a submodule, the package imports light

        return ALFWorldTaskSpace
    raise AttributeError(name)
