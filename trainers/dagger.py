"""DAgger: the warm start's own episodes, relabelled by a stepwise expert, added to its SFT data.

Behaviour cloning trains on the states the expert visits; the clone then makes a mistake, lands
in a state no demonstration shows and makes more (on ALFWorld the preset's clone agreed with its
teacher on 75% of the teacher's own states but 22% of its own: docs/alfworld.md). DAgger (Ross,
Gordon and Bagnell, 2011) closes that gap: play the clone, ask the expert what it would have done
in every state the clone reached, add those (prompt, expert command) pairs to the data, train
again on everything gathered, and repeat.

The expert is the task space's `teacher(spec)` hook (agentgym.tasks.protocol.Teacher). Its state
is rebuilt by replaying each episode in a fresh env: environments are deterministic given their
TaskSpec, and an env that is not is refused (its observations would differ from the episode's).
"""

from __future__ import annotations

from contextlib import closing
from typing import Callable

import numpy as np

from agentgym import progress
from agentgym.errors import ConfigError
from agentgym.policies.base import SamplingParams
from agentgym.chat import ChatConfig
from agentgym.rollout import collect, make_chat_env
from agentgym.trainers.config import DaggerConfig, EnvConfig
from agentgym.trainers.samples import Sample, sft_sample
from agentgym.tasks.spec import TaskSpec
from agentgym.trajectory import Trajectory


def teacher_labels(space, chat_env, trajectories: list[Trajectory]) -> list[list[str]]:
    """Per trajectory, per step: the command `space.teacher` gives in the state the step was taken
    from. Each episode is replayed in `chat_env` (a ChatEnv of the rollout's settings) with the
    replies it gave; a replay whose observation differs from the episode's raises, since the
    teacher would then be asked about another state."""
    out = []
    for traj in trajectories:
        task = TaskSpec.from_dict(traj.task)
        teacher = space.teacher(task)
        _, info = chat_env.reset(seed=traj.seed, options={"task": task})
        labels = []
        for i, step in enumerate(traj.steps):
            observation = info["env_observation"]
            if observation.strip() != step.observation.strip():
                raise ValueError(f"replaying task {task.task_id} gave another observation at step {i} than its "
                                 f"episode: {task.env_id} is not deterministic given its TaskSpec, so DAgger "
                                 "cannot relabel its episodes (set sft.dagger.rounds=0)")
            labels.append(teacher.act(observation, info))
            _, _, _, _, info = chat_env.step(step.text)
            if info.get("action_valid") and info.get("action") is not None:
                teacher.observe(info["action"], info["env_observation"], info)
        out.append(labels)
    return out


def relabelled_samples(policy, trajectories: list[Trajectory], labels: list[list[str]], format_action=None) -> list[Sample]:
    """One sample per step: the prompt the policy saw there, the teacher's command as the target
    (`format_action` puts a command in the env's reply format; the bare command by default)."""
    samples = []
    for traj, commands in zip(trajectories, labels):
        for step, command in zip(traj.steps, commands):
            if step.messages is None:
                raise ValueError("DAgger needs the chat prompt of every step: collect with record_messages=True")
            reply = format_action(command) if format_action is not None else command
            samples.append(sft_sample(policy.encode_prompt(step.messages), policy.encode_response(reply)))
    return samples


def dagger_rounds(policy, dagger_cfg: DaggerConfig, env_cfg: EnvConfig, tasks: list, samples: list[Sample],
                  train: Callable[[list[Sample]], dict], sampling: SamplingParams, seed: int,
                  log: Callable[[str], None] | None = None, session=progress.CURRENT) -> list[dict]:
    """`dagger_cfg.rounds` rounds: the policy plays `dagger_cfg.tasks` of `tasks` (a new slice each
    round while they last), its states are relabelled by the teacher, and `train` runs on the
    demonstrations plus every relabelled step so far. Returns one stats dict per round."""
    from agentgym.registration import get_task_space

    space = get_task_space(env_cfg.id)
    if not callable(getattr(space, "teacher", None)):
        raise ConfigError(f"sft.dagger needs a stepwise expert, the task space's teacher(spec) hook, which "
                          f"{env_cfg.id} lacks: set sft.dagger.rounds=0")
    if not tasks:
        raise ConfigError("sft.dagger has no train tasks to play: raise env.max_tasks or set sft.dagger.rounds=0")
    gathered: list[Sample] = []
    stats = []
    with closing(make_chat_env(env_cfg.id, env_cfg.env_kwargs, **ChatConfig.of(env_cfg.chat).kwargs())) as chat_env:
        for r in range(dagger_cfg.rounds):
            start = (r * dagger_cfg.tasks) % len(tasks)  # a new slice of the tasks each round, while they last
            chosen = [tasks[(start + j) % len(tasks)] for j in range(min(dagger_cfg.tasks, len(tasks)))]
            student = SamplingParams(temperature=dagger_cfg.temperature, max_new_tokens=sampling.max_new_tokens,
                                     admissible_only=sampling.admissible_only, seed=seed + 1000 + r)
            trajs = collect(env_cfg.id, chosen, policy, group_size=1, seed=seed + 1000 + r, sampling=student,
                            chat=env_cfg.chat, env_kwargs=env_cfg.env_kwargs, executor=env_cfg.executor,
                            session=session)
            trajs = [t for t in trajs if not t.infra_error]
            labels = teacher_labels(space, chat_env, trajs)
            agree = [step.action == label for t, ls in zip(trajs, labels) for step, label in zip(t.steps, ls)]
            gathered += relabelled_samples(policy, trajs, labels, chat_env.format_action)
            trained = train(samples + gathered)
            stats.append({"round": r + 1, "episodes": len(trajs),
                          "success": float(np.mean([t.success for t in trajs])) if trajs else 0.0,
                          "agreement": float(np.mean(agree)) if agree else 0.0, "relabelled_steps": len(agree),
                          "samples": len(samples) + len(gathered), "final_loss": trained["final_loss"],
                          "steps": trained["steps"]})
            if log is not None:
                row = stats[-1]
                log(f"DAgger round {r + 1}/{dagger_cfg.rounds}: the policy's success {row['success']:.3f} on "
                    f"{row['episodes']} train episodes, agreement with the teacher {row['agreement']:.3f} over "
                    f"{row['relabelled_steps']} steps; SFT on {row['samples']} samples, loss {row['final_loss']:.4f}")
    return stats
