"""A toy corridor TextEnv (walk to the key's room, take it) and a tiny model built on its text,
shared by the trainer tests; small enough that a few updates run in seconds on a CPU."""

from __future__ import annotations

import hashlib

import torch

import numpy as np
import pytest

from agentgym.core import TextEnv
from agentgym.registration import register_env
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split
from agentgym.tasks import generation as _generation

# One thread: on a shared, oversubscribed CPU two OpenMP threads run ~10x slower than one.
torch.set_num_threads(1)

TOY_ID = "agentgym/TestCorridor-v0"
SHORT_CHAT = {"history": 1, "system_prompt": "Act.", "show_admissible": True}


class CorridorSpace(TaskSpace):
    env_id = TOY_ID
    split_dir = None

    def sample(self, rng, length: int = 4):
        return TaskSpec(TOY_ID, {"length": length, "goal": int(rng.integers(1, length))}, seed=int(rng.integers(1000)))

    def mutate(self, spec, rng):
        return self.sample(rng, spec.params["length"])

    def solve(self, spec):
        return ["go right"] * spec.params["goal"] + ["take key"]

    def category(self, spec):
        return f"goal{spec.params['goal']}"

    def build_splits(self):
        tasks = [TaskSpec(TOY_ID, {"length": 4, "goal": g}, seed=s) for g in (1, 2, 3) for s in range(8)]
        return {"train": [t for t in tasks if t.seed < 6], "heldout": [t for t in tasks if t.seed >= 6],
                "heldout_unseen": []}


class CorridorEnv(TextEnv):
    task_space = CorridorSpace()
    rules = "Walk along the corridor with 'go left' / 'go right' and 'take key' in the key's room."

    def _info(self, valid=True):
        state = f"{self.pos}:{self.done}"
        return {"task_id": self.task.task_id, "instruction": f"take the key in room {self.goal}",
                "anchor": hashlib.sha256(state.encode()).hexdigest()[:12],
                "admissible_actions": ["go left", "go right", "take key"], "action_valid": valid,
                "success": self.done, "score": float(self.done)}

    def _obs(self):
        return f"You are in room {self.pos}." + (" You see a key." if self.pos == self.goal else "")

    def _reset(self, task):
        self.pos, self.goal, self.length, self.done = 0, task.params["goal"], task.params["length"], False
        return self._obs(), self._info()

    def _step(self, action):
        valid = True
        if action == "go right" and self.pos < self.length - 1:
            self.pos += 1
        elif action == "go left" and self.pos > 0:
            self.pos -= 1
        elif action == "take key" and self.pos == self.goal:
            self.done = True
            return "You take the key.", 1.0, True, False, self._info()
        else:
            valid = False
            return "Nothing happens.", 0.0, False, False, self._info(valid)
        return self._obs(), 0.0, False, False, self._info(valid)


@pytest.fixture(scope="session")
def toy_env_id(tmp_path_factory):
    split_dir = tmp_path_factory.mktemp("corridor_splits")
    for name, tasks in _generation.build_splits(CorridorSpace()).items():
        save_split(split_dir / f"{name}.jsonl", tasks)
    CorridorSpace.split_dir = split_dir
    register_env(TOY_ID, CorridorEnv, max_episode_steps=8)
    return TOY_ID


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, toy_env_id):
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts

    out = tmp_path_factory.mktemp("tiny_model")
    texts = collect_env_texts(toy_env_id, num_tasks=18, chat=SHORT_CHAT)
    return build_tiny_model(out, env_id=toy_env_id, texts=texts, vocab_size=400, hidden=64, layers=2, heads=4)


@pytest.fixture(scope="session")
def tiny_policy_factory(tiny_model_dir):
    from agentgym.policies.hf import HFPolicy

    def make(**kwargs):
        return HFPolicy(tiny_model_dir, **kwargs)

    return make


@pytest.fixture
def toy_config(toy_env_id):
    return _toy_config


def _toy_config(tmp_path, model_dir, *overrides):
    """A TrainConfig small enough for an iteration to take a second or two on a CPU."""
    from agentgym.trainers.config import load_config

    return load_config({"env": {"chat": dict(SHORT_CHAT)}}, [
        f"env.id={TOY_ID}", f"policy.model={model_dir}", f"run_dir={tmp_path}/run", "iterations=2",
        "rollout.tasks_per_iter=2", "rollout.group_size=2", "rollout.max_new_tokens=16", "eval.every=0",
        "eval.num_tasks=2", "checkpoint_every=1", "log.plot=false", "log.tensorboard=false",
        "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "ppo.lr=1e-3", "env.max_turns=4",
        *overrides,
    ])


@pytest.fixture(scope="session")
def sft_model_dir(tmp_path_factory, tiny_model_dir, toy_env_id):
    """The tiny model after a short behaviour-cloning run: it solves some toy tasks, so rollouts
    have successes and failures and the estimators give non-zero advantages."""
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories, sft_samples, train_sft

    policy = HFPolicy(tiny_model_dir)
    trajs = oracle_trajectories(toy_env_id, get_task_space(toy_env_id).split("train"), SHORT_CHAT, None)
    train_sft(policy, sft_samples(policy, trajs), epochs=25, lr=3e-3, batch_size=16)
    out = tmp_path_factory.mktemp("sft_model")
    policy.save(out)
    return out
