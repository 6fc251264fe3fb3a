"""Round 5 (issue 67 item 20): the restriction on TextWorld's grammar expressions, which keeps a
hostile ALFWorld game file from running code, applies to our games only: after an ALFWorld env
(played, closed), the user's own TextWorld grammars evaluate as TextWorld does."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")
pytest.importorskip("fast_downward", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")

import agentgym  # noqa: E402,F401 - registers the envs
from agentgym.envs.alfworld import engine as engine_module  # noqa: E402
from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402

ID = "agentgym/ALFWorld-v0"
SMALL = TaskSpec(ID, {"task_type": "pick_clean_then_place_in_recep", "floorplan": 401, "object": "SoapBar",
                      "target": "Toilet"}, seed=5)
# the user's own expressions and what TextWorld's evaluation gives for them
USER_EXPRESSIONS = {"len(x)": 5, "x.upper()": "APPLE", "x[0]": "a", "str(n + 1)": "3", "x * 2": "appleapple",
                    "x.title()": "Apple"}


def _derive(expression: str):
    from textworld.envs.pddl import textgen

    symbol = textgen.EvalSymbol(expression, {"variables": {"x": "apple", "n": 2}})
    return symbol.derive()[0].symbol


@pytest.mark.parametrize("fast", [True, False])
def test_round5_the_alfworld_restriction_does_not_leak_into_the_users_textworld(fast):
    """Round 5, item 20: after one ALFWorld env, even closed, 5 of 6 of the user's own TextWorld
    expressions raised UnsafeGame; they evaluate as TextWorld does, and our games stay restricted."""
    env = gym.make(ID, fast=fast)
    env.reset(options={"task": SMALL})
    env.step("look")
    assert {e: _derive(e) for e in USER_EXPRESSIONS} == USER_EXPRESSIONS  # while our env is open
    env.close()
    assert {e: _derive(e) for e in USER_EXPRESSIONS} == USER_EXPRESSIONS  # and after

    # inside our engine's work the restriction holds: an expression that does more than read names
    inside = engine_module._our_derivations(lambda self, e: _derive(e))
    with pytest.raises(engine_module.UnsafeGame, match="does more than read names"):
        inside(None, "len(x)")
    assert inside(None, "x") == "apple"
    assert _derive("len(x)") == 5  # and outside again


def test_round5_a_hostile_expression_in_our_game_is_still_refused():
    """Round 5, item 20: scoping the restriction keeps it where it matters, for our own engine's
    derivations, at load (check_grammar) and at derive time (the evaluation without builtins)."""
    engine = engine_module.Engine.acquire()
    try:
        from agentgym.envs.alfworld import games

        game = games.load_game(ALFWorldTaskSpace().game_dir(SMALL) / games.GAME_FILE)
        hostile = dict(game, grammar=game["grammar"].replace("{r.name}", "{().__class__.__base__}", 1))
        with pytest.raises(engine_module.UnsafeGame):
            engine.load(hostile)
        engine.load(game)
        assert engine.reset()["admissible_commands"]
    finally:
        engine.release()
