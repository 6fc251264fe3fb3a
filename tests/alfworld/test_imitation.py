"""benchmarks/diagnostics/alfworld_imitation.py: the searching demonstrator's decision rebuilt at every step of
an episode from what its prompts showed (no game is played)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.diagnostics.alfworld_imitation import admissible_of, replay  # noqa: E402

TRAJ_DATA = {"task_type": "pick_and_place_simple",
             "pddl_params": {"object_target": "KeyChain", "parent_target": "Shelf", "toggle_target": ""}}
# (observation shown, admissible list as the marks layout prints it, the demonstrator's command)
EPISODE = [
    ("You are in the middle of a room. Your task is to: put a keychain in shelf.",
     "go to armchair 1, go to shelf 1, look", "go to armchair 1"),
    ("You arrive at armchair 1. On the armchair 1, you see a keychain 2, and a pillow 1.",
     "examine armchair 1, go to armchair 1 (tried), go to shelf 1, take keychain 2 from armchair 1, "
     "take pillow 1 from armchair 1", "take keychain 2 from armchair 1"),
    ("You pick up the keychain 2 from the armchair 1.",
     "examine keychain 2, go to armchair 1 (tried), go to shelf 1, look", "go to shelf 1"),
    ("You arrive at shelf 1. On the shelf 1, you see nothing.",
     "go to armchair 1 (tried), go to shelf 1 (tried), move keychain 2 to shelf 1", "move keychain 2 to shelf 1"),
]


def episode(actions):
    steps = [{"observation": obs, "action": action, "action_valid": True,
              "messages": [{"role": "user", "content": f"Current observation:\n{obs}\nAdmissible actions: {listed}\n"
                                                       "\nReply with the action only."}]}
             for (obs, listed, _), action in zip(EPISODE, actions)]
    return {"instruction": "put a keychain in shelf.", "steps": steps, "final_observation": "You won!"}


def test_the_demonstrators_own_episode_agrees_at_every_step_and_each_decision_has_its_kind():
    decisions = replay(episode([c for *_, c in EPISODE]), TRAJ_DATA)
    assert [kind for kind, _, _ in decisions] == ["search", "take", "deliver", "deliver"]
    assert all(label == action for _, label, action in decisions)


def test_a_wrong_object_taken_is_a_take_decision_missed_and_the_teacher_follows_the_episode():
    actions = ["go to armchair 1", "take pillow 1 from armchair 1", "go to shelf 1", "move keychain 2 to shelf 1"]
    decisions = replay(episode(actions), TRAJ_DATA)
    assert decisions[1] == ("take", "take keychain 2 from armchair 1", "take pillow 1 from armchair 1")
    assert decisions[0][1] == decisions[0][2]


def test_a_policys_answers_replace_the_episodes_commands():
    asked = []

    def answer(messages, lists):
        asked.extend(lists)
        return ["look"] * len(lists)

    decisions = replay(episode([c for *_, c in EPISODE]), TRAJ_DATA, answer)
    assert [action for *_, action in decisions] == ["look"] * 4
    assert asked[1][1] == "go to armchair 1"  # the "(tried)" mark is not part of the command


def test_a_prompt_without_an_admissible_list_is_refused_with_what_to_do():
    assert admissible_of("Admissible actions: go to a 1 (tried), look") == ["go to a 1", "look"]
    with pytest.raises(ValueError, match="alfworld-tiny preset's chat layout"):
        admissible_of("Current observation: you see nothing.")
