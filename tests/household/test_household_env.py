"""Behaviour of HouseholdEnv: Gymnasium conformance, determinism, text, anchors, bad input."""

import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym import ChatEnv, TaskSpec
from agentgym.envs.household.env import HouseholdEnv
from agentgym.envs.household.world import HELD, NOTHING
from agentgym.errors import UnknownTaskError
from agentgym.tasks.validation import validate

ENV_ID = "agentgym/Household-v0"
SPACE = HouseholdEnv.task_space


def spec(**params):
    base = dict(task_type="pick_and_place", room="kitchen", object="apple", receptacle="fridge",
                num_receptacles=4, num_distractors=0, closed_fraction=0.0, goal_visible=True)
    base.update(params)
    seed = base.pop("seed", 0)
    return TaskSpec(ENV_ID, params=base, seed=seed)


# check_env warns that a wrapped env is not the raw env: checking through the wrappers is the point.
@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_check_env_unwrapped_and_wrapped():
    env = gym.make(ENV_ID)
    check_env(env.unwrapped, skip_render_check=True)
    check_env(env, skip_render_check=True)
    check_env(HouseholdEnv(shaped_rewards=True), skip_render_check=True)


def test_info_keys_and_reset_by_task_id():
    env = gym.make(ENV_ID)
    task = SPACE.split("heldout")[3]
    obs, info = env.reset(options={"task": task.task_id})
    assert set(agentgym.INFO_KEYS) <= set(info) and "progress" in info
    assert info["task_id"] == task.task_id
    assert obs.endswith(f"Your task is to: {info['instruction']}")
    assert obs.startswith("You are in the middle of a room. Looking quickly around you, you see a ")
    assert not info["success"] and info["score"] == 0.0
    assert all(a in info["admissible_actions"] for a in ("look", "inventory"))


def test_unknown_task_id_is_one_clear_error():
    env = gym.make(ENV_ID)
    with pytest.raises(UnknownTaskError, match="unknown task id"):
        env.reset(options={"task": "0000000000000000"})


def test_reset_without_task_samples_train_with_seed():
    env = gym.make(ENV_ID)
    _, a = env.reset(seed=5)
    _, b = env.reset(seed=5)
    assert a["task_id"] == b["task_id"]
    train_ids = {t.task_id for t in SPACE.split("train")}
    assert a["task_id"] in train_ids


def _trajectory(task, actions, seed):
    env = gym.make(ENV_ID)
    out = [env.reset(seed=seed, options={"task": task})]
    for a in actions:
        out.append(env.step(a))
    return repr(out)


def test_same_task_and_seed_give_byte_identical_trajectories():
    task = SPACE.split("train")[17]
    actions = SPACE.solve(task)[:-1] + ["look", "take bogus", "inventory"] + SPACE.solve(task)[-1:]
    assert _trajectory(task, actions, 3) == _trajectory(task, actions, 3)
    # The reset seed only seeds np_random: the initial state is a function of the task alone.
    assert _trajectory(task, actions, 3) == _trajectory(task, actions, 4)


def test_oracle_text_follows_alfworld_style():
    env = HouseholdEnv()
    task = spec(task_type="pick_clean_then_place", closed_fraction=1.0, receptacle="cabinet", goal_visible=False,
                num_receptacles=8, seed=4)
    obs, info = env.reset(options={"task": task})
    assert "Your task is to: " in obs
    seen = []
    for action in SPACE.solve(task):
        assert action in info["admissible_actions"]
        obs, reward, terminated, _, info = env.step(action)
        assert info["action_valid"]
        seen.append(obs)
    assert terminated and info["success"] and reward == 1.0 and info["score"] == 1.0
    text = "\n".join(seen)
    assert "You pick up the apple 1 from the " in text
    assert "You clean the apple 1 using the sinkbasin 1." in text
    assert "You move the apple 1 to the cabinet " in text
    assert "You open the cabinet " in text and ". In it, you see " in text


def test_closed_containers_hide_contents_until_opened():
    task = spec(room="kitchen", object="apple", receptacle="countertop", closed_fraction=1.0, goal_visible=False,
                num_receptacles=10, num_distractors=8, seed=1)
    env = HouseholdEnv()
    _, info = env.reset(options={"task": task})
    world = env.world
    lay = world.layout
    closed = [r for r, o in enumerate(lay.rec_openable) if o and not world.rec_open[r]]
    full = [r for r in closed if world.contents(r)]
    assert full, "the layout should hide something in a closed container"
    r = full[0]
    name = lay.rec_names[r]
    obs, *_ , info = env.step(f"go to {name}")
    assert obs == f"You arrive at {name}. The {name} is closed."
    hidden = lay.obj_names[world.contents(r)[0]]
    assert hidden not in obs
    assert not any(a.startswith("take ") for a in info["admissible_actions"])
    obs, *_ , info = env.step(f"take {hidden} from {name}")
    assert obs == "Nothing happens." and not info["action_valid"]
    obs, *_ , info = env.step(f"open {name}")
    assert obs.startswith(f"You open the {name}. The {name} is open. In it, you see ") and hidden in obs
    assert f"take {hidden} from {name}" in info["admissible_actions"]
    obs, *_ , info = env.step(f"close {name}")
    assert obs == f"You close the {name}."
    assert f"take {hidden} from {name}" not in info["admissible_actions"]


def test_anchor_equal_for_equal_states_by_different_paths():
    task = spec(num_receptacles=6, num_distractors=3, seed=2)
    env = HouseholdEnv()
    _, start = env.reset(options={"task": task})
    names = env.world.layout.rec_names
    # path A: go to the first receptacle directly; path B: wander first
    _, *_, a = env.step(f"go to {names[0]}")
    env.reset(options={"task": task})
    env.step(f"go to {names[1]}")
    env.step(f"go to {names[2]}")
    env.step("look")
    _, *_, b = env.step(f"go to {names[0]}")
    assert a["anchor"] == b["anchor"]
    assert a["anchor"] != start["anchor"]
    # look / inventory / invalid actions leave the state, hence the anchor, unchanged
    for action in ("look", "inventory", "fly away", f"examine {names[0]}"):
        _, *_, c = env.step(action)
        assert c["anchor"] == a["anchor"]
    # opening then closing returns to the same state
    env.reset(options={"task": spec(closed_fraction=1.0, receptacle="countertop", goal_visible=False,
                                    num_receptacles=8, seed=3)})
    lay = env.world.layout
    box = next(n for n, o in zip(lay.rec_names, lay.rec_openable) if o)
    _, *_, before = env.step(f"go to {box}")
    _, *_, opened = env.step(f"open {box}")
    _, *_, closed = env.step(f"close {box}")
    assert before["anchor"] == closed["anchor"] != opened["anchor"]


def test_anchors_differ_between_tasks_and_states():
    env = HouseholdEnv()
    anchors = set()
    for task in SPACE.split("train")[:20]:
        _, info = env.reset(options={"task": task})
        anchors.add(info["anchor"])
        for action in SPACE.solve(task):
            _, *_, info = env.step(action)
            anchors.add(info["anchor"])
    states = sum(1 + len(SPACE.solve(t)) for t in SPACE.split("train")[:20])
    assert len(anchors) == states  # oracle paths never revisit a state


def test_sparse_and_shaped_rewards_sum_to_the_score():
    task = spec(task_type="pick_two_obj_and_place", room="livingroom", object="book", receptacle="sofa",
                num_receptacles=7, num_distractors=4, closed_fraction=0.5, seed=9)
    plan = SPACE.solve(task)
    for shaped in (False, True):
        env = HouseholdEnv(shaped_rewards=shaped)
        env.reset(options={"task": task})
        rewards = [env.step(a)[1] for a in plan]
        assert sum(rewards) == pytest.approx(1.0)
        if not shaped:
            assert rewards[:-1] == [0.0] * (len(plan) - 1)
        else:
            assert sum(r > 0 for r in rewards) == 4  # hold, place, hold, place


def test_time_limit_keeps_partial_score_without_reward():
    env = gym.make(ENV_ID)
    task = spec(num_receptacles=4, seed=5)
    env.reset(options={"task": task})
    env.step(SPACE.solve(task)[0])
    env.step(SPACE.solve(task)[1])  # holding the apple: progress 0.5
    total, truncated, steps = 0.0, False, 2
    while not truncated:
        _, reward, terminated, truncated, info = env.step("look")
        total += reward
        steps += 1
    assert steps == 50 and not terminated
    assert total == 0.0 and info["score"] == 0.5 == info["progress"] and not info["success"]


def test_one_object_at_a_time():
    task = spec(task_type="pick_two_obj_and_place", room="bathroom", object="soapbar", receptacle="toilet",
                num_receptacles=3, seed=7)
    env = HouseholdEnv()
    env.reset(options={"task": task})
    lay = env.world.layout
    first, second = lay.goal_objs
    env.world.obj_loc[second] = env.world.obj_loc[first]  # same place for this test only
    from agentgym.envs.household.commands import entry_for

    env._entry = entry_for(env.world)
    r = lay.rec_names[env.world.obj_loc[first]]
    env.step(f"go to {r}")
    _, *_, info = env.step(f"take {lay.obj_names[first]} from {r}")
    assert info["action_valid"]
    obs, *_, info = env.step(f"take {lay.obj_names[second]} from {r}")
    assert obs == "Nothing happens." and not info["action_valid"]
    assert env.step("inventory")[0] == f"You are carrying: a {lay.obj_names[first]}."


def test_lenient_spelling_of_commands():
    task = spec(seed=11)
    env = HouseholdEnv()
    env.reset(options={"task": task})
    plan = SPACE.solve(task)
    go, take = plan[0], plan[1]
    assert env.step("  " + go.upper() + ". ")[-1]["action_valid"]
    obj = take.split(" from ")[0]
    assert env.step(obj)[-1]["action_valid"]  # "take apple 1" at its receptacle
    move = plan[-1]
    env.step(plan[2])
    assert env.step(move.replace("move", "put").replace(" to ", " in "))[-1]["success"]


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_chat_wrapper_and_async_vector_env():
    chat = ChatEnv(gym.make(ENV_ID))
    msgs, info = chat.reset(options={"task": SPACE.split("train")[0]})
    assert "Admissible actions: " in msgs[-1]["content"]
    check_env(gym.make(ENV_ID, shaped_rewards=True), skip_render_check=True)
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make(ENV_ID)] * 2, shared_memory=False)
    try:
        obs, infos = envs.reset(seed=[1, 2])
        assert len(obs) == 2 and all(o.startswith("You are in the middle") for o in obs)
        obs, rewards, term, trunc, infos = envs.step(["look", "inventory"])
        assert list(obs)[1] == "You are not carrying anything."
    finally:
        envs.close()


def test_gym_make_with_module_prefix_in_fresh_process():
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('agentgym:agentgym/Household-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "import sys\n"
        "assert 'torch' not in sys.modules, 'the household env must not import torch'\n"
        "print(type(env.unwrapped).__name__, info['admissible_actions'][-1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "HouseholdEnv look"


def test_invalid_params_raise_a_clear_error():
    env = HouseholdEnv()
    with pytest.raises(ValueError, match="microwave|object"):
        env.reset(options={"task": spec(task_type="pick_heat_then_place", object="book")})
    with pytest.raises(ValueError, match="num_receptacles"):
        env.reset(options={"task": spec(num_receptacles=99)})
    with pytest.raises(ValueError, match="unknown params"):
        env.reset(options={"task": spec(lamp="desklamp")})
    assert not validate(SPACE, spec(colour="red"))


def test_random_walks_keep_invariants_and_anchor_is_a_state_bijection():
    import random

    rng = random.Random(0)
    env = HouseholdEnv()
    anchor_of: dict = {}
    state_of: dict = {}
    words = set()
    for task in SPACE.split("train")[:150] + SPACE.split("heldout_unseen")[:50]:
        obs, info = env.reset(options={"task": task})
        for _ in range(40):
            actions = info["admissible_actions"]
            assert actions == sorted(set(actions))
            action = actions[rng.randrange(len(actions))]
            obs, reward, terminated, _, info = env.step(action)
            assert info["action_valid"], action  # every admissible command is executable
            assert obs and obs != "Nothing happens."
            words.update(obs.replace(",", " ").replace(".", " ").replace(":", " ").split())
            w = env.world
            held = [o for o, where in enumerate(w.obj_loc) if where == HELD]
            assert held == ([w.held] if w.held != NOTHING else [])
            assert 0.0 <= info["progress"] == info["score"] <= 1.0
            assert info["success"] == (info["score"] == 1.0) == terminated
            assert reward == (1.0 if terminated else 0.0)
            key = (task.task_id, w.key())
            assert anchor_of.setdefault(key, info["anchor"]) == info["anchor"]
            assert state_of.setdefault(info["anchor"], key) == key
            if terminated:
                break
    assert len(anchor_of) > 2000  # many distinct states were visited
    # A small, regular vocabulary: lower-case words and numbers, a few capitalized sentence starts.
    assert len(words) < 250
    assert all(w.isalnum() or w == "There's" for w in words), sorted(w for w in words if not w.isalnum())


def test_collect_groups_share_the_initial_state_and_oracle_solves():
    from agentgym.policies.scripted import OraclePolicy

    tasks = SPACE.split("heldout")[:4]
    trajs = agentgym.collect(ENV_ID, tasks, OraclePolicy(), group_size=3, seed=7)
    assert len(trajs) == 12 and all(t.success and not t.infra_error for t in trajs)
    for g in range(4):
        group = trajs[3 * g: 3 * g + 3]
        assert len({t.steps[0].anchor for t in group}) == 1
        assert len({t.steps[0].observation for t in group}) == 1
        assert [s.action for s in group[0].steps] == SPACE.solve(tasks[g])


def test_state_caches_are_bounded(monkeypatch):
    import random

    from agentgym.envs.household import commands, world

    monkeypatch.setattr(commands, "_MAX_STATES", 60)
    monkeypatch.setattr(commands, "_cached", 0)
    world.clear_state_caches()  # states cached by earlier tests
    rng = random.Random(1)
    env = HouseholdEnv()
    for task in SPACE.split("heldout")[:30]:
        _, info = env.reset(options={"task": task})
        for _ in range(30):
            actions = info["admissible_actions"]
            *_, info = env.step(actions[rng.randrange(len(actions))])
            assert info["action_valid"]
            assert sum(len(lay.states) for lay in world._LAYOUTS.values()) <= 61
