"""agentgym/ALFWorld-v0: ALFWorld's real engine behind the TextEnv contract."""

import json
import pickle
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")
pytest.importorskip("fast_downward", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")

import agentgym  # noqa: E402,F401
from agentgym.envs.alfworld import games, scenes  # noqa: E402
from agentgym.envs.alfworld.engine import Engine  # noqa: E402
from agentgym.envs.alfworld.env import ALFWorldEnv  # noqa: E402
from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace  # noqa: E402
from agentgym.errors import AgentGymError, ConfigError, TaskParamError  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402
from agentgym.tasks import generation as _generation
from agentgym.tasks import validation as _validation

ID = "agentgym/ALFWorld-v0"
SPACE = ALFWorldTaskSpace()
# A small bathroom (9 receptacles) keeps the stock-engine comparison fast.
SMALL = TaskSpec(ID, {"task_type": "pick_clean_then_place_in_recep", "floorplan": 401, "object": "SoapBar",
                      "target": "Toilet"}, seed=5)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path_factory.getbasetemp() / "agentgym-cache"))


@pytest.fixture(scope="module")
def env():
    e = ALFWorldEnv()
    yield e
    e.close()


def _one_of_each_type():
    rng = np.random.default_rng(7)
    return [SPACE.sample(rng, task_type=t) for t in scenes.TASK_TYPES]


def test_check_env_passes(env):
    check_env(env, skip_render_check=True)


def test_the_oracle_solves_a_game_of_every_type_with_alfworld_text(env):
    for spec in _one_of_each_type():
        obs, info = env.reset(options={"task": spec})
        assert obs.startswith("You are in the middle of a room. Looking quickly around you, you see ")
        assert "Welcome to TextWorld" not in obs and info["instruction"] and obs.endswith(info["instruction"])
        assert info["success"] is False and info["score"] == 0.0
        total, scores = 0.0, []
        for action in SPACE.solve(spec):
            assert action in info["admissible_actions"]
            obs, reward, terminated, truncated, info = env.step(action)
            total += reward
            scores.append(info["score"])
        assert terminated and info["success"] and total == 1.0, spec.params
        assert scores == sorted(scores), scores  # progress never goes backwards along the plan
        # after the win: nothing happens, the episode stays terminated
        obs, reward, terminated, _, info = env.step(action)
        assert obs == "Nothing happens." and reward == 0.0 and terminated and info["action_valid"] is False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200), st.just(""), st.just("x" * 100_000), st.just("\x00\x1b[2J go to"),
                 st.just("go to moon 1"), st.just("take apple 99 from fridge 1")))
def test_any_string_is_a_legal_action(env, action):
    _, info0 = env.reset(options={"task": SMALL})
    if " ".join(action.lower().split()) in info0["admissible_actions"]:
        return
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs == "Nothing happens." and info["action_valid"] is False
    assert info["anchor"] == info0["anchor"] and reward == 0.0 and not terminated


def test_actions_match_admissible_commands_whatever_the_case_and_spacing(env):
    _, info = env.reset(options={"task": SMALL})
    target = next(a for a in info["admissible_actions"] if a.startswith("go to "))
    obs, _, _, _, info = env.step("  " + target.upper().replace(" ", "   ") + " ")
    assert info["action_valid"] is True and obs.startswith("You arrive at ")


def test_anchor_is_the_true_state_not_the_text(env):
    spec = next(s for s in (SPACE.sample(np.random.default_rng(i), task_type="pick_and_place_simple",
                                         floorplan=7) for i in range(20)))
    _, info = env.reset(options={"task": spec})
    start = info["anchor"]
    _, _, _, _, info = env.step("look")
    assert info["anchor"] == start  # looking around changes no state
    _, _, _, _, info = env.step("go to cabinet 1")
    at_cabinet = info["anchor"]
    assert at_cabinet != start
    _, _, _, _, info = env.step("open cabinet 1")
    assert info["anchor"] != at_cabinet
    _, _, _, _, info = env.step("close cabinet 1")
    assert info["anchor"] == at_cabinet  # open then close: the same state again
    _, _, _, _, info = env.step("examine cabinet 1")
    assert info["anchor"] == at_cabinet
    other = SPACE.sample(np.random.default_rng(99), task_type="pick_and_place_simple", floorplan=7)
    _, info = env.reset(options={"task": other})
    assert info["anchor"] != start  # another game, another anchor


def test_fast_engine_gives_the_stock_engines_texts(tmp_path):
    game = games.load_game(SPACE.game_dir(SMALL) / games.GAME_FILE)
    runs = []
    for fast in (False, True, "from disk"):
        if fast == "from disk":  # the translation comes from the on-disk cache the run before wrote
            from agentgym.envs.alfworld import engine as engine_module

            engine_module._translated.cache_clear()
            assert list((games.cache_dir() / "sas").glob("*.sas.z"))  # SAS text, never pickles
        engine = Engine(game, fast=bool(fast))
        state = engine.reset()
        rng = np.random.default_rng(0)
        trace = [(state.feedback, state["admissible_commands"], engine.facts())]
        for i in range(12):
            commands = state["admissible_commands"]
            state = engine.step(commands[int(rng.integers(len(commands)))] if i % 4 else "dance")
            trace.append((state.feedback, state["admissible_commands"], engine.facts()))
        runs.append(trace)
    assert runs[0] == runs[1] == runs[2]


def test_generated_games_are_alfworld_files_checked_by_the_planner():
    folder = SPACE.game_dir(SMALL)
    game = json.loads((folder / games.GAME_FILE).read_text())
    traj = json.loads((folder / games.TRAJ_FILE).read_text())
    assert set(game) >= {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"} and game["solvable"]
    assert "UNKNOWN GOAL" not in game["grammar"] and "Your task is to: clean some soapbar" in game["grammar"] \
        or "Your task is to: put a clean soapbar" in game["grammar"]
    assert traj["task_type"] == SMALL.params["task_type"]
    assert traj["pddl_params"]["object_target"] == "SoapBar" and traj["pddl_params"]["parent_target"] == "Toilet"
    assert "Sink_bar_" in game["pddl_problem"] and "_bar_SinkBasin" in game["pddl_problem"]  # "sinkbasin 1"
    assert game["walkthrough"] == SPACE.solve(SMALL)
    # The goal never holds at the start, and a game whose goal does is refused.
    start = next(line.split()[-1].rstrip(")") for line in game["pddl_problem"].splitlines() if "(atLocation agent1" in line)
    trivial = dict(game, pddl_problem=game["pddl_problem"][:game["pddl_problem"].index("(:goal")]
                   + f"(:goal (and (atLocation agent1 {start})))\n)")
    with pytest.raises(games.GameError, match="already holds"):
        games.check_game(trivial)


def test_params_are_checked_in_one_line():
    for params, words in [
        ({**SMALL.params, "target": "Fridge"}, "not a target"),
        ({**SMALL.params, "object": "Apple"}, "has no"),
        ({**SMALL.params, "floorplan": 99}, "floorplan must be"),
        ({**SMALL.params, "task_type": "fly"}, "task_type must be"),
        ({**SMALL.params, "extra": 1}, "unknown keys"),
    ]:
        with pytest.raises(TaskParamError, match=words) as err:
            _validation.canonical(SPACE, TaskSpec(ID, params, seed=1))
        assert "\n" not in str(err.value)


def test_unseen_floorplans_are_reserved_and_the_shipped_splits_respect_them():
    unseen = set(scenes.unseen_floorplans())
    assert len(unseen) == 24 and len(scenes.all_floorplans()) == 120
    rng = np.random.default_rng(0)
    drawn = [SPACE.sample(rng) for _ in range(300)]
    assert not any(_validation.is_reserved(SPACE, t) for t in drawn)  # training draws never use a test floor plan
    assert all(_validation.is_reserved(SPACE, SPACE.sample(rng, unseen=True)) for _ in range(50))
    splits = {name: SPACE.split(name) for name in SPACE.split_names}
    assert all(splits.values())
    assert all(t.params["floorplan"] in unseen for t in splits["heldout_unseen"])
    assert not any(t.params["floorplan"] in unseen for t in splits["train"] + splits["heldout"])
    ids = [t.task_id for ts in splits.values() for t in ts]
    assert len(ids) == len(set(ids))
    heldout = _validation.heldout_keys(SPACE)
    assert not any(t.task_id in heldout or _validation.is_heldout(SPACE, t) for t in splits["train"])
    assert all(_validation.is_heldout(SPACE, t) for t in splits["heldout"] + splits["heldout_unseen"])
    assert {t.params["task_type"] for t in splits["train"]} == set(scenes.TASK_TYPES)


def _official_layout(tmp_path):
    """Our games in ALFWorld's download layout (split/task/trial/game.tw-pddl + traj_data.json)."""
    rng = np.random.default_rng(3)
    layout = {"train": [SMALL, SPACE.sample(rng, task_type="look_at_obj_in_light")],
              "valid_seen": [SPACE.sample(rng, task_type="pick_two_obj_and_place")],
              "valid_unseen": [SPACE.sample(rng, task_type="pick_cool_then_place_in_recep", unseen=True)]}
    for split, specs in layout.items():
        for i, spec in enumerate(specs):
            dest = tmp_path / split / f"{spec.params['task_type']}-x-{i}" / f"trial_T2019_{i}"
            shutil.copytree(SPACE.game_dir(spec), dest)
    unsolvable = tmp_path / "valid_seen" / "pick_and_place_simple-x-9" / "trial_9"  # skipped, as alfworld does
    shutil.copytree(SPACE.game_dir(SMALL), unsolvable)
    game = json.loads((unsolvable / games.GAME_FILE).read_text())
    (unsolvable / games.GAME_FILE).write_text(json.dumps(dict(game, solvable=False, walkthrough=None)))
    (tmp_path / "train" / "pick_and_place_with_movable_recep-x-0" / "trial_1").mkdir(parents=True)
    shutil.copy(SPACE.game_dir(SMALL) / games.GAME_FILE,
                tmp_path / "train" / "pick_and_place_with_movable_recep-x-0" / "trial_1")  # skipped, as alfworld does
    return layout


def test_data_path_plays_official_games_with_alfworld_splits(tmp_path):
    layout = _official_layout(tmp_path)
    env = gym.make(ID, data_path=str(tmp_path)).unwrapped
    space = env.task_space
    assert [len(space.split(n)) for n in ("train", "heldout", "heldout_unseen")] == [2, 1, 1]
    assert all(t.params["game"].startswith("valid_seen/") for t in space.split("heldout"))
    assert _validation.is_heldout(space, space.split("heldout_unseen")[0]) and not _validation.is_heldout(space, space.split("train")[0])
    for spec in space.split("train") + space.split("heldout") + space.split("heldout_unseen"):
        _, info = env.reset(options={"task": spec})
        for action in space.solve(spec):
            _, _, terminated, _, info = env.step(action)
        assert terminated and info["success"]
    # the searching demonstrator plays official games too (it reads the game and its traj_data.json)
    spec = space.split("heldout")[0]
    _, info = env.reset(options={"task": spec})
    for action in space.solve_searching(spec):
        _, _, terminated, _, info = env.step(action)
    assert terminated and info["success"]
    # progress comes from the game's traj_data.json
    _, info = env.reset(options={"task": space.split("train")[0]})
    first = space.solve(space.split("train")[0])
    for action in first[:2]:
        _, _, _, _, info = env.step(action)
    assert 0 < info["score"] < 1
    assert layout  # ids do not depend on where the data lives: relative paths
    assert all(not t.params["game"].startswith("/") for t in space.split("train"))
    env.close()


def test_bad_data_paths_and_game_files_are_one_line_errors_naming_the_file(tmp_path):
    with pytest.raises(ConfigError, match="is not a folder") as err:
        gym.make(ID, data_path=str(tmp_path / "nope"))
    assert "\n" not in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no ALFWorld games under .*empty"):
        gym.make(ID, data_path=str(tmp_path / "empty"))
    data = tmp_path / "data"
    _official_layout(data)
    env = gym.make(ID, data_path=str(data)).unwrapped
    spec = env.task_space.split("train")[0]
    path = env.task_space.game_dir(spec) / games.GAME_FILE
    cases = [("{not json", "cannot read"), ('{"grammar": ""}', "corrupt"),
             (json.dumps(dict(json.loads(path.read_text()), solvable=False)), "unsolvable"),
             (json.dumps(dict(json.loads(path.read_text()), pddl_problem="(define nonsense")), "does not load")]
    original = path.read_text()
    for text, words in cases:
        path.write_text(text)
        env.close()
        with pytest.raises(AgentGymError, match=words) as err:
            env.reset(options={"task": spec})
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    path.write_text(original)
    env.reset(options={"task": spec})  # and the env recovers
    env.close()


def test_without_the_extra_one_line_names_it():
    code = ("import sys; sys.modules['alfworld'] = None\n"
            "import gymnasium as gym, agentgym\n"
            "try:\n    gym.make('agentgym/ALFWorld-v0')\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("MissingExtraError") and "agentgym-credit[alfworld]" in out and out.count("\n") == 1


def test_pickled_env_continues_the_episode(env):
    plan = SPACE.solve(SMALL)
    env.reset(options={"task": SMALL})
    for action in plan[:2]:
        _, _, _, _, info = env.step(action)
    clone = pickle.loads(pickle.dumps(env))
    assert clone._engine.anchor() == info["anchor"]
    for action in plan[2:]:
        _, _, terminated, _, info2 = clone.step(action)
    assert terminated and info2["success"]
    clone.close()


def test_shaped_rewards_add_up_to_the_score():
    env = ALFWorldEnv(shaped_rewards=True)
    env.reset(options={"task": SMALL})
    total = 0.0
    for action in ["look"] + SPACE.solve(SMALL):
        _, reward, _, _, info = env.step(action)
        total += reward
    assert abs(total - 1.0) < 1e-9 and info["success"]
    env.close()


def test_the_task_generator_and_the_trainer_gate_refuse_held_out_games():
    from agentgym.errors import HeldoutTaskError
    from agentgym.tasks.generator import TaskGenerator
    from agentgym.tasks.pool import TaskPool
    from agentgym.tasks.splits import refuse_heldout

    gen = TaskGenerator(SPACE, TaskPool(), seed=0)
    heldout, unseen = SPACE.split("heldout")[0], SPACE.split("heldout_unseen")[0]
    assert gen.admit(heldout, "sample") == "heldout"
    assert gen.admit(unseen, "sample") == "heldout"
    # a copy of a held-out-unseen game with another seed is a new game, but on a test floor plan
    assert gen.admit(TaskSpec(ID, unseen.params, seed=unseen.seed + 1), "mutate") == "reserved"
    keys = _validation.heldout_keys(SPACE)
    for task in (heldout, unseen, TaskSpec(ID, unseen.params, seed=unseen.seed + 1)):
        with pytest.raises(HeldoutTaskError):
            refuse_heldout([task], keys, reserved=SPACE.reserved)
    refuse_heldout(SPACE.split("train")[:50], keys, reserved=SPACE.reserved)  # train passes
    rng = np.random.default_rng(1)
    assert not any(_validation.is_reserved(SPACE, _generation.mutate(SPACE, unseen if i % 2 else heldout, rng)) != (i % 2 == 1)
                   for i in range(40))  # mutation stays on its side of the floor-plan split


def test_a_game_whose_goal_is_unreachable_is_one_line_naming_the_file(tmp_path):
    layout = _official_layout(tmp_path)
    env = gym.make(ID, data_path=str(tmp_path)).unwrapped
    spec = env.task_space.split("train")[0]
    path = env.task_space.game_dir(spec) / games.GAME_FILE
    game = json.loads(path.read_text())
    problem = game["pddl_problem"][:game["pddl_problem"].index("(:goal")]
    # No object of this type exists in the bathroom: Fast Downward proves the goal unreachable.
    problem += "(:goal (exists (?o - object) (and (objectType ?o AppleType) (holds agent1 ?o))))\n)"
    path.write_text(json.dumps(dict(game, pddl_problem=problem, walkthrough=None)))
    for call in (lambda: env.task_space.solve(spec), lambda: env.reset(options={"task": spec})):
        with pytest.raises(games.GameError) as err:
            call()
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(games.GameError, match="no plan"):
        games.check_game(dict(game, pddl_problem=problem))
    assert layout
    env.close()


def test_loading_another_game_releases_the_facts_textworld_interned():
    from mementos import core
    from textworld.logic import Proposition

    other = SPACE.sample(np.random.default_rng(5), task_type="pick_and_place_simple")
    engine = Engine()
    engine.load(games.load_game(SPACE.game_dir(SMALL) / games.GAME_FILE))
    engine.reset()
    first = {str(f) for f in engine._pddl._pddl_state.facts}
    engine.load(games.load_game(SPACE.game_dir(other) / games.GAME_FILE))
    engine.reset()
    interned = {str(v) for k, v in core._memento_cache.items() if type(k) is tuple and k and k[0] is Proposition}
    current = {str(f) for f in engine._pddl._pddl_state.facts}
    assert not (interned & first) - current  # the first game's facts are no longer kept


def test_an_evaluation_loads_fast_downward_once_per_env_open_at_once_not_once_per_episode(monkeypatch):
    """Every engine loads its own copy of Fast Downward's 34 MB library, never unloaded (its
    deleted temporary file keeps the disk space): an evaluation that made an engine per episode
    filled /tmp. Closed envs give their engine back to the next env of the process."""
    from agentgym.envs.alfworld import engine as engine_module
    from agentgym.evaluation.evaluate import evaluate
    from agentgym.policies import RandomPolicy

    used = []  # the engines envs played on (held here, so no id is reused)
    original = ALFWorldEnv._load

    def recording(self, task):
        engine = original(self, task)
        if not any(e is engine for e in used):
            used.append(engine)
        return engine

    monkeypatch.setattr(ALFWorldEnv, "_load", recording)
    monkeypatch.setattr(engine_module, "_IDLE", {True: [], False: []}, raising=False)
    result = evaluate("agentgym/ALFWorld-v0", RandomPolicy(seed=0), "heldout", episodes_per_task=2, limit=3,
                      env_kwargs={"max_episode_steps": 3}, max_batch_episodes=2)
    assert result.overall.episodes == 6 and result.infra_errors == 0
    assert len(used) == 2  # 6 episodes, at most two envs open at once


def test_list_help_false_leaves_help_out_of_the_list_but_not_out_of_the_game():
    listed = gym.make("agentgym/ALFWorld-v0")
    unlisted = gym.make("agentgym/ALFWorld-v0", list_help=False)
    task = ALFWorldTaskSpace().split("heldout")[0]
    _, info = listed.reset(options={"task": task})
    _, quiet = unlisted.reset(options={"task": task})
    assert "help" in info["admissible_actions"]
    assert quiet["admissible_actions"] == [a for a in info["admissible_actions"] if a != "help"]
    _, _, _, _, after = unlisted.step("help")
    assert after["action_valid"] and "help" not in after["admissible_actions"]
    listed.close()
    unlisted.close()


def test_command_texts_cached_per_game_are_the_texts_derived_at_every_step():
    # The fast grammar derives a command's text once per game and mapping where no symbol reads a
    # fact an action can change (go to [{r.name | receptacleatlocation(...)}]: receptacles never move).
    # Along random walks in a game of every type, each step's feedback, list and win equal those of
    # the same walk with nothing cached.
    from agentgym.envs.alfworld import engine as engine_module

    def walk(spec, cached):
        engine = Engine.acquire()
        try:
            engine.load(games.load_game(SPACE.game_dir(spec) / games.GAME_FILE))
            grammar = engine._base._logic.grammar
            if not cached:
                grammar._reads_no_changeable_fact = lambda start: False
            state, rng, trace = engine.reset(), np.random.default_rng(3), []
            for _ in range(25):
                trace.append((state.feedback, state["admissible_commands"], state["won"]))
                state = engine.step(str(rng.choice(state["admissible_commands"])))
            return trace, len(grammar.__dict__.get("_derived", {}))
        finally:
            engine.release()

    for spec in _one_of_each_type():
        (with_cache, cached), (without, _) = walk(spec, True), walk(spec, False)
        assert with_cache == without and cached > 0, spec.params
    domain = "(:action Go :effect (and (not (atLocation ?a ?l)) ; (opened ?r)\n (atLocation ?a ?m) (increase (total-cost) 1)))"
    assert engine_module._changeable_predicates(domain) == {"atlocation"}  # comments and PDDL words left out


def test_goal_progress_reads_every_fact_of_the_predicates_it_needs():
    from agentgym.envs.alfworld import progress

    seen = set()
    for spec in _one_of_each_type():
        traj = SPACE.traj_data(spec)
        engine = Engine.acquire()
        try:
            engine.load(games.load_game(SPACE.game_dir(spec) / games.GAME_FILE))
            engine.reset()
            for command in SPACE.solve(spec):
                engine.step(command)
                state = engine._pddl._pddl_state
                scan = {}
                for f in state.facts:  # every fact of the state, one by one
                    if f.name in progress._READ:
                        scan.setdefault(f.name, set()).add(tuple(a.name for a in f.arguments))
                assert dict(progress.facts_by_name(state, progress._READ)) == scan
                seen.add(round(progress.goal_progress(engine, traj["task_type"], traj["pddl_params"]), 3))
        finally:
            engine.release()
    assert {0.2, 0.333, 0.4, 0.5, 0.667} <= seen  # every task type's sub-goals were reached on the way
