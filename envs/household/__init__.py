"""ALFWorld-like household environment (agentgym/Household-v0): pure Python, fast, with an
oracle planner, six task types and shipped train / heldout / heldout_unseen splits."""

__all__ = ["HouseholdEnv", "HouseholdTaskSpace"]


def __getattr__(name: str):
    # Lazy, so that `python -m agentgym.envs.household.tasks` does not import tasks twice.
    if name == "HouseholdEnv":
        from agentgym.envs.household.env import HouseholdEnv  # lazy: a submodule, the package imports light

        return HouseholdEnv
    if name == "HouseholdTaskSpace":
        from agentgym.envs.household.tasks import HouseholdTaskSpace  # lazy: a submodule, the package imports light

        return HouseholdTaskSpace
    raise AttributeError(name)
