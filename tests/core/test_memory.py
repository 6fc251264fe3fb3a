"""ChatEnv(memory=n): the agent's own past actions in the prompt, on every env family."""

import shutil

import gymnasium as gym
import pytest

import agentgym
from agentgym import ChatEnv

FAMILIES = {  # one id per family, and what it needs beyond the core install
    "agentgym/Household-v0": None,
    "agentgym/WebShop-v0": None,
    "agentgym/SearchQA-v0": None,
    "agentgym/ToolUse-v0": None,
    "agentgym/SWE-v0": lambda: shutil.which("bwrap") or pytest.skip("bubblewrap not installed"),
    "agentgym/TextWorld-Simple-v0": lambda: pytest.importorskip("textworld"),
}


def memory_line(messages) -> str:
    user = messages[-1]["content"]
    line = next(l for l in user.splitlines() if l.startswith("Your actions so far:"))
    return line.removeprefix("Your actions so far: ").removesuffix(".")


@pytest.mark.parametrize("env_id", sorted(FAMILIES))
def test_memory_records_own_actions_and_refusals_on_every_family(env_id):
    if FAMILIES[env_id] is not None:
        FAMILIES[env_id]()
    env = ChatEnv(gym.make(env_id), history=0, memory=3)
    try:
        space = env.unwrapped.task_space
        task = space.split("train")[0]
        messages, _ = env.reset(options={"task": task})
        assert memory_line(messages) == "none"
        plan = space.solve(task)
        taken = []
        for action in plan[:2]:
            messages, _, terminated, truncated, info = env.step(env.format_action(action))
            taken.append(" ".join(info["action"].split()) + ("" if info["action_valid"] else " (nothing happened)"))
            if terminated or truncated:
                break
        if not (terminated or truncated):
            messages, *_ = env.step("\u2603 not an action at all \u2603")
            assert memory_line(messages).endswith("(nothing happened)")
            assert len(env.memory_entries) == min(3, len(taken) + 1)
        # each entry is the parsed action (open action spaces such as JSON calls, folded), oldest first
        for entry, expected in zip(env.memory_entries, taken[-3:]):
            assert entry.split(" ...")[0] in expected or expected.startswith(entry.removesuffix(" ..."))
        messages, _ = env.reset(options={"task": task})
        assert memory_line(messages) == "none"  # a new episode remembers nothing
    finally:
        env.close()


def test_memory_keeps_the_last_n_within_the_word_budget():
    env = ChatEnv(gym.make("agentgym/Household-v0"), parser="raw", history=0, memory=4, memory_max_words=8)
    env.reset(seed=0)
    for action in ["look", "inventory", "go to nowhere 7", "look", "inventory"]:
        messages, *_ = env.step(action)
    # the last 4 entries hold 1 + 6 + 1 + 1 words: a budget of 8 keeps the newest three
    assert env.memory_entries == ["go to nowhere 7 (nothing happened)", "look", "inventory"]
    assert memory_line(messages) == "go to nowhere 7 (nothing happened); look; inventory"


def test_a_long_open_ended_action_cannot_fill_the_memory():
    env = ChatEnv(gym.make("agentgym/Household-v0"), parser="raw", history=0, memory=2, memory_max_words=40)
    env.reset(seed=0)
    env.step("word " * 500)
    entry = env.memory_entries[0]
    assert entry.endswith("... (nothing happened)") and len(entry.split()) == 24 + 3


def test_memory_off_by_default_and_bad_values_are_one_line_errors():
    env = ChatEnv(gym.make("agentgym/Household-v0"), parser="raw", history=0)
    messages, _ = env.reset(seed=0)
    assert "Your actions so far" not in messages[-1]["content"]
    for kwargs, words in [({"memory": -1}, "memory is the number"), ({"memory": 2, "history": "full"}, "windowed"),
                          ({"memory": 2, "memory_style": "notes"}, "memory_style"),
                          ({"memory": 2, "memory_max_words": 0}, "memory_max_words")]:
        with pytest.raises(ValueError, match=words):
            ChatEnv(gym.make("agentgym/Household-v0"), **{"history": 0, **kwargs})


def test_memory_lets_a_memoryless_view_search_without_revisits():
    """What memory is for: a scripted agent that reads only the prompt (the admissible actions and
    the memory line) and goes to the first receptacle it has not tried never revisits one."""
    env = ChatEnv(gym.make("agentgym/Household-v0", max_episode_steps=12), parser="raw", history=0, memory=12)
    space = env.unwrapped.task_space
    tasks = [t for t in space.split("heldout") if space.category(t) == "pick_and_place/easy"][:20]
    for task in tasks:
        messages, info = env.reset(options={"task": task})
        visits = []
        for _ in range(12):
            tried = set(memory_line(messages).split("; "))
            goes = [a for a in info["admissible_actions"] if a.startswith("go to ") and a not in tried]
            if not goes:
                break
            visits.append(goes[0])
            messages, _, terminated, truncated, info = env.step(goes[0])
            if terminated or truncated:
                break
        assert len(visits) == len(set(visits))


def test_marks_style_marks_tried_admissible_actions_and_adds_no_names():
    env = ChatEnv(gym.make("agentgym/Household-v0"), parser="raw", history=0, memory=12, memory_style="marks")
    messages, info = env.reset(seed=1)
    first, second = [a for a in info["admissible_actions"] if a.startswith("go to ")][:2]
    env.step(first)
    messages, _, _, _, info = env.step(second)
    user = messages[-1]["content"]
    assert f"{first} (tried)" in user and "Your actions so far" not in user
    assert f"{second} (tried)" not in user  # standing there: not admissible, so not listed at all
    env.step("go to the moon")  # invalid actions are never marked
    # a reply that copies the mark means the action itself
    _, _, _, _, info = env.step(f"{first} (tried)")
    assert info["action"] == first and info["action_valid"]


def test_marks_style_falls_back_to_the_list_without_admissible_actions():
    pytest.importorskip("bm25s")
    env = ChatEnv(gym.make("agentgym/SearchQA-v0"), history=0, memory=3, memory_style="marks")
    messages, info = env.reset(seed=0)
    if info.get("admissible_actions") is not None:
        pytest.skip("SearchQA lists admissible actions")
    env.step("<action>search[anything]</action>")
    messages, *_ = env.step("<action>search[something else]</action>")
    assert memory_line(messages).startswith("search[anything]")


def _seen_line(messages) -> str | None:
    user = messages[-1]["content"]
    return next((l for l in user.splitlines() if l.startswith("Seen: ")), None)


def test_update_sightings_keeps_the_tasks_things_with_the_latest_action_that_showed_them():
    from agentgym.chat import update_sightings

    seen: dict[str, str] = {}
    task = "put two apple in fridge."
    update_sightings(seen, task, "go to countertop 1", "On the countertop 1, you see a apple 2, a bread 1, and a fridge 3.")
    assert seen == {"apple 2": "go to countertop 1", "fridge 3": "go to countertop 1"}  # bread is not the task's
    update_sightings(seen, task, "take apple 2 from countertop 1", "You pick up the apple 2 from the countertop 1.")
    assert seen["apple 2"] == "go to countertop 1"  # an action naming the thing is not a sighting of it
    update_sightings(seen, task, "Open Drawer 2", "In it, you see a apple 2 and a apple 5.")
    assert list(seen.items())[-2:] == [("apple 2", "open drawer 2"), ("apple 5", "open drawer 2")]  # newest last


def test_memory_seen_line_in_the_prompt_refused_with_full_history_and_reset_per_episode():
    class Rooms(gym.Env):  # the smallest env with an instruction and named things
        def reset(self, *, seed=None, options=None):
            return "You are in a hall.", {"instruction": "find the key", "admissible_actions": ["go to box 1", "go to box 2"]}

        def step(self, action):
            obs = "In the box 2, you see a key 4 and a coin 1." if action == "go to box 2" else "Nothing here."
            return obs, 0.0, False, False, {"action_valid": True, "admissible_actions": ["go to box 1", "go to box 2"]}

    env = ChatEnv(Rooms(), parser="raw", history=0, memory=5, memory_style="marks", memory_seen=True)
    messages, _ = env.reset()
    assert _seen_line(messages) is None
    env.step("go to box 1")
    messages, *_ = env.step("go to box 2")
    assert _seen_line(messages) == "Seen: key 4 (go to box 2)."  # coin is not named by the task
    assert "go to box 2 (tried)" in messages[-1]["content"]
    messages, _ = env.reset()
    assert _seen_line(messages) is None and env.sightings == {}
    with pytest.raises(ValueError, match="memory_seen is for windowed prompts"):
        agentgym.chat.ChatConfig(history="full", memory_seen=True)


def test_memory_unvisited_lists_the_go_to_places_not_yet_taken_in_list_order():
    places = [f"go to cabinet {i}" for i in range(1, 13)] + ["look", "open cabinet 1"]

    class Rooms(gym.Env):  # twelve cabinets: more places than the line shows
        def reset(self, *, seed=None, options=None):
            return "You are in a kitchen.", {"instruction": "find a cup", "admissible_actions": places}

        def step(self, action):
            return "Nothing here.", 0.0, False, False, {"action_valid": action in places, "admissible_actions": places}

    def unvisited(messages):
        lines = [l for l in messages[-1]["content"].splitlines() if l.startswith("Not visited yet: ")]
        return lines[0].removeprefix("Not visited yet: ").removesuffix(".") if lines else None

    env = ChatEnv(Rooms(), parser="raw", history=0, memory_unvisited=True)
    messages, _ = env.reset()
    assert unvisited(messages) == ", ".join(f"cabinet {i}" for i in range(1, 11)) + ", (and 2 more)"
    env.step("go to cabinet 1")
    env.step("go to cabinet 99")  # not admissible: it visits nothing
    messages, *_ = env.step("go to cabinet 3")
    assert unvisited(messages).startswith("cabinet 2, cabinet 4, cabinet 5,") and "(and 1 more)" not in unvisited(messages)
    assert unvisited(messages).endswith("cabinet 11, cabinet 12")
    messages, _ = env.reset()  # a new episode has visited nothing
    assert unvisited(messages).startswith("cabinet 1, cabinet 2,")
    plain, _ = ChatEnv(Rooms(), parser="raw", history=0).reset()
    assert unvisited(plain) is None
    with pytest.raises(ValueError, match="memory_unvisited is for windowed prompts"):
        agentgym.chat.ChatConfig(history="full", memory_unvisited=True)
    with pytest.raises(ValueError, match="memory_unvisited must be true or false"):
        agentgym.chat.ChatConfig(memory_unvisited="yes")
