"""Household tasks converted to ALFWorld games play the same in ALFWorld's engine."""

import re

import pytest

pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")
pytest.importorskip("fast_downward", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")

from agentgym.envs.alfworld.engine import Engine  # noqa: E402
from agentgym.envs.alfworld.household import household_game  # noqa: E402
from agentgym.envs.household.env import HouseholdEnv  # noqa: E402
from agentgym.registration import get_task_space  # noqa: E402

_ITEM = re.compile(r"\ban? ([a-z]+ \d+)")


def _same_up_to_order(a: str, b: str) -> bool:
    return sorted(_ITEM.findall(a)) == sorted(_ITEM.findall(b)) and _ITEM.sub("#", a) == _ITEM.sub("#", b)


def test_household_oracle_wins_in_alfworld_with_the_same_texts():
    space = get_task_space("agentgym/Household-v0")
    heldout = space.split("heldout")
    tasks = [next(t for t in heldout if t.params["task_type"] == tt and t.params["num_receptacles"] >= 5)
             for tt in sorted({t.params["task_type"] for t in heldout})]
    engine, env = Engine(), HouseholdEnv()
    for spec in tasks:
        engine.load(household_game(spec)[0])
        state = engine.reset()
        h_obs, h_info = env.reset(options={"task": spec})
        alf = re.sub(r"^\s*-= Welcome to TextWorld, ALFRED! =-\s*", "", state.feedback).strip()
        assert _same_up_to_order(h_obs, alf), (h_obs, alf)
        for command in space.solve(spec):
            assert command in state["admissible_commands"]
            # the admissible commands are household's plus ALFWorld's "help"
            assert set(state["admissible_commands"]) == set(h_info["admissible_actions"]) | {"help"}
            state = engine.step(command)
            h_obs, _, _, _, h_info = env.step(command)
            assert _same_up_to_order(h_obs, state.feedback.strip()), (command, h_obs, state.feedback)
        assert state["won"] and h_info["success"], spec.params


def test_exported_household_tasks_play_as_alfworld_v0_games(tmp_path):
    """export_household writes the official layout: ALFWorld-v0 with data_path= plays them as its
    held-out split, by task type, and household's oracle wins each in the real engine."""
    import gymnasium as gym

    from agentgym.envs.alfworld.household import export_household
    from agentgym.envs.alfworld.tasks import OfficialTaskSpace

    space = get_task_space("agentgym/Household-v0")
    heldout = space.split("heldout")
    tasks = [next(t for t in heldout if t.params["task_type"] == tt) for tt in ("pick_and_place", "pick_heat_then_place")]
    games = export_household(tasks, tmp_path)
    official = OfficialTaskSpace(tmp_path)
    played = official.split("heldout")
    assert sorted(t.params["game"] for t in played) == sorted(games)
    assert {official.category(t) for t in played} == {"pick_and_place_simple", "pick_heat_then_place_in_recep"}
    env = gym.make("agentgym/ALFWorld-v0", data_path=str(tmp_path))
    for spec, game in zip(tasks, games):
        task = next(t for t in played if t.params["game"] == game)
        assert official.solve(task) == list(space.solve(spec))
        env.reset(options={"task": task})
        for command in official.solve(task):
            _, _, terminated, _, info = env.step(command)
            assert info["action_valid"], command
        assert terminated and info["success"]
    env.close()
    with pytest.raises(ValueError, match="valid_seen"):
        export_household(tasks, tmp_path, split="heldout")
