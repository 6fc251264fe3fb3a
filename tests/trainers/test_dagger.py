"""DAgger (trainers/dagger.py): a stepwise teacher relabels the states a policy reached, replayed in
a fresh env; the labels become SFT targets on the policy's own prompts."""

import pytest

from agentgym.tasks.spec import TaskSpec
from agentgym.trainers.config import load_config
from agentgym.trainers.dagger import relabelled_samples, teacher_labels
from agentgym.trajectory import Step, Trajectory

TASK = TaskSpec("test/Counter-v0", {"goal": 3}, seed=0)


class CounterEnv:
    """A ChatEnv stand-in: a counter that `up` raises, `noop` is invalid; observation 'at N'."""

    def __init__(self, drift=False):
        self.drift = drift  # a non-deterministic env: the replay sees another observation

    def reset(self, seed=None, options=None):
        self.n = 1 if self.drift else 0
        return [], self._info(True)

    def step(self, text):
        valid = text == "up"
        self.n += valid
        return [], 0.0, False, False, dict(self._info(valid), action=text)

    def _info(self, valid):
        return {"env_observation": f"at {self.n}", "action_valid": valid, "admissible_actions": ["up", "stop"]}


class Teacher:
    """Says `up` until the goal, then `stop`; counts what it was told was done."""

    def __init__(self, goal):
        self.goal, self.done = goal, 0

    def act(self, observation, info):
        assert observation == f"at {self.done}"  # it was fed exactly the valid actions of the episode
        return "up" if self.done < self.goal else "stop"

    def observe(self, action, observation, info):
        self.done += action == "up"


class Space:
    def teacher(self, spec):
        return Teacher(spec.params["goal"])


def episode(actions):
    steps = []
    n = 0
    for a in actions:
        steps.append(Step(observation=f"at {n}", anchor="", text=a, action=a, action_valid=a == "up",
                          messages=[{"role": "user", "content": f"at {n}"}]))
        n += a == "up"
    return Trajectory(task_id=TASK.task_id, group_id="g", env_id=TASK.env_id, seed=0, task=TASK.to_dict(), steps=steps)


def test_labels_follow_the_episodes_own_states_invalid_actions_included():
    traj = episode(["up", "noop", "up", "up", "up"])
    assert teacher_labels(Space(), CounterEnv(), [traj]) == [["up", "up", "up", "up", "stop"]]


def test_an_env_whose_replay_differs_from_the_episode_is_refused_with_the_switch():
    with pytest.raises(ValueError, match=r"not deterministic.*sft\.dagger\.rounds=0"):
        teacher_labels(Space(), CounterEnv(drift=True), [episode(["up"])])


def test_relabelled_samples_train_the_teachers_formatted_command_on_the_policys_prompt():
    class Policy:
        def encode_prompt(self, messages):
            return [ord(c) for c in messages[-1]["content"]]

        def encode_response(self, text):
            return [ord(c) for c in text] + [0]

    samples = relabelled_samples(Policy(), [episode(["noop", "up"])], [["up", "stop"]],
                                 format_action=lambda a: f"<{a}>")
    assert len(samples) == 2
    first = samples[0]
    targets = [t for t, m in zip(first.input_ids, first.loss_mask) if m]
    assert first.input_ids[:4] == [ord(c) for c in "at 0"] and targets == [ord(c) for c in "<up>"] + [0]


def test_dagger_needs_a_teacher_and_a_warm_start_without_it_keeps_its_settings_record():
    from agentgym.tasks.space import TaskSpace
    from agentgym.trainers.env_requirements import required_features, SWITCH_OFF
    from agentgym.trainers.run_setup import sft_settings

    plain = load_config("household-tiny", [])
    dagger = load_config("household-tiny", ["sft.dagger.rounds=2"])
    assert "teacher" in required_features(dagger.env, dagger.sft) and "teacher" not in required_features(plain.env, plain.sft)
    assert SWITCH_OFF["teacher"] == ["sft.dagger.rounds=0"] and not callable(getattr(TaskSpace, "teacher", None))
    before = sft_settings(plain.env, plain.policy, plain.sft, 0, {})
    assert not any(k.startswith("sft.dagger") for k in before)  # records made before DAgger existed still match
    assert sft_settings(dagger.env, dagger.policy, dagger.sft, 0, {})["sft.dagger"]["rounds"] == 2


def test_sft_epochs_zero_is_dagger_alone_on_a_start_model_that_is_a_clone_already():
    import torch

    from agentgym.trainers.checks import validate_config
    from agentgym.trainers.sft import train_sft

    validate_config(load_config("alfworld-tiny", ["sft.epochs=0", "sft.dagger.rounds=2"]))  # accepted with rounds

    class Clone:  # the policy surface train_sft reads; no batch may reach the model
        device = "cpu"
        model = torch.nn.Linear(3, 3)

        def trainable_parameters(self):
            return list(self.model.parameters())

    clone = Clone()
    before = [p.detach().clone() for p in clone.model.parameters()]
    stats = train_sft(clone, ["a demonstration"] * 4, epochs=0, lr=1e-3, batch_size=2)
    assert stats["steps"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, clone.model.parameters()))  # the clone as it came
