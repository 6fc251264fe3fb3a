"""ALFWorld-v0's searching demonstrator (envs/alfworld/searching.py): it wins every task type
using only what it has seen, searches in the admissible list's order (not toward where the
object is), and plays through the rollout engine as the SFT expert (sft.expert=searching)."""

import re

import pytest

pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'agentgym[alfworld]'")

from agentgym.envs.alfworld import games  # noqa: E402
from agentgym.envs.alfworld.engine import Engine  # noqa: E402
from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace  # noqa: E402

SPACE = ALFWorldTaskSpace()
# six heldout games, one of each task type (the split interleaves the types)
GAMES = SPACE.split("heldout")[6:12]


def _replay(task, commands):
    """(won, the first observation, [(command, observation, admissible before it)])."""
    engine = Engine.acquire()
    try:
        engine.load(games.load_game(SPACE.game_dir(task) / games.GAME_FILE))
        state = engine.reset()
        first = state.feedback
        steps = []
        for command in commands:
            admissible = list(state["admissible_commands"])
            assert command in admissible, f"{command!r} is not admissible"
            state = engine.step(command)
            steps.append((command, state.feedback, admissible))
        return bool(state["won"]), first, steps
    finally:
        engine.release()


@pytest.mark.parametrize("task", GAMES, ids=lambda t: t.params["task_type"])
def test_the_searcher_wins_each_task_type_searching_in_list_order(task):
    assert {t.params["task_type"] for t in GAMES} == set(games.scenes.TASK_TYPES)
    plan = SPACE.solve_searching(task)
    won, first, steps = _replay(task, plan)
    assert won and len(plan) <= 50
    # until the goal object first shows up, each stop is the first unvisited receptacle of the list
    # (target-type ones last): the order a policy can read off its prompt, whatever the hidden layout
    obj = SPACE.traj_data(task)["pddl_params"]["object_target"].lower()
    target = SPACE.traj_data(task)["pddl_params"]["parent_target"].lower()
    visited = set()
    for command, observation, admissible in steps:
        if command.startswith("go to "):
            unvisited = [c for c in admissible if c.startswith("go to ") and c not in visited]
            preferred = [c for c in unvisited if c[6:].rsplit(" ", 1)[0] != target] or unvisited
            assert command == preferred[0], (command, preferred[:3])
            visited.add(command)
        if re.search(rf"\b{obj} \d+\b", observation.lower()):
            break
    else:
        pytest.fail("the goal object was never seen")


def test_the_searcher_does_not_walk_to_the_object_and_takes_longer_than_the_planner():
    # the planner knows where things are; the searcher only what it saw: over six games it takes
    # more steps, and at least one game makes it visit a receptacle without the object first
    planner = [SPACE.solve(t) for t in GAMES]
    searcher = [SPACE.solve_searching(t) for t in GAMES]
    assert sum(map(len, searcher)) > sum(map(len, planner))
    assert any(s[0] != p[0] for s, p in zip(searcher, planner))


def test_the_searcher_is_the_sft_expert_through_the_chat_layer():
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.rollout import collect

    chat = {"parser": "raw", "history": 0, "system_prompt": "", "memory": 50, "memory_style": "marks",
            "memory_seen": True}
    expert = OraclePolicy(SPACE, search=True)
    trajs = collect("agentgym/ALFWorld-v0", GAMES[:2], expert, group_size=1, chat=chat,
                    env_kwargs={"max_episode_steps": 50, "list_help": False})
    assert all(t.success for t in trajs)
    # the pick-two game's second object is found through the prompt's "Seen:" line or the search
    assert all(step.action_valid for t in trajs for step in t.steps)


def test_the_teacher_fed_a_policys_episode_answers_as_the_demonstrator_in_every_state_it_reaches():
    # DAgger's labels (trainers/dagger.py): the teacher follows an episode someone else plays. Fed the
    # demonstrator's own episode, it repeats each command; fed a random policy's, it answers in states
    # the demonstrator never reaches, and its answer is always an admissible command there.
    from agentgym.chat import ChatConfig
    from agentgym.policies.scripted import OraclePolicy, RandomPolicy
    from agentgym.rollout import collect, make_chat_env
    from agentgym.trainers.dagger import teacher_labels

    chat = {"parser": "raw", "history": 0, "system_prompt": "", "memory": 50, "memory_style": "marks",
            "memory_seen": True}
    kwargs = {"max_episode_steps": 12, "list_help": False}
    own = collect("agentgym/ALFWorld-v0", GAMES[:1], OraclePolicy(SPACE, search=True), chat=chat, env_kwargs=kwargs)
    wandering = collect("agentgym/ALFWorld-v0", GAMES[:1], RandomPolicy(3), chat=chat, env_kwargs=kwargs)
    env = make_chat_env("agentgym/ALFWorld-v0", kwargs, **ChatConfig.of(chat).kwargs())
    try:
        labels = teacher_labels(SPACE, env, own + wandering)
        assert labels[0] == [step.action for step in own[0].steps]
        _, info = env.reset(options={"task": GAMES[0]})
        for step, label in zip(wandering[0].steps, labels[1]):
            assert label in info["admissible_actions"]
            _, _, _, _, info = env.step(step.text)
        assert labels[1] != [step.action for step in wandering[0].steps]
    finally:
        env.close()


def test_dagger_rounds_play_a_new_slice_each_round_and_train_on_the_growing_aggregate():
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.scripted import RandomPolicy
    from agentgym.trainers.config import load_config
    from agentgym.trainers.dagger import dagger_rounds

    class Student(RandomPolicy):  # a policy with the two encoders SFT samples need
        def encode_prompt(self, messages):
            return [len(m["content"]) for m in messages]

        def encode_response(self, text):
            return [len(text), 0]

    cfg = load_config("alfworld-tiny", ["sft.dagger.rounds=2", "sft.dagger.tasks=2", "env.env_kwargs.max_episode_steps=5"])
    sizes = []

    def train(samples):
        sizes.append(len(samples))
        return {"final_loss": 0.5, "steps": 1}

    stats = dagger_rounds(Student(1), cfg.sft.dagger, cfg.env, list(GAMES[:3]), ["demo"] * 7, train,
                          SamplingParams(max_new_tokens=16), seed=0, session=None)
    # round 1 plays games 0-1, round 2 games 2 and 0: 2 episodes of 5 steps each round, all relabelled
    assert [s["episodes"] for s in stats] == [2, 2] and [s["relabelled_steps"] for s in stats] == [10, 10]
    assert sizes == [7 + 10, 7 + 20]  # the demonstrations plus every relabelled step so far
    assert all(0 <= s["agreement"] < 1 for s in stats)  # a random student leaves its teacher
