"""A real (toy) training run leaves viewable trajectories with the advantages it trained on, and
`agentgym train` / SFT report progress in a log: a line per iteration / epoch with elapsed and ETA."""

from __future__ import annotations

import io
import re

import numpy as np

from agentgym import progress
from agentgym.trainers.records import eval_dir, train_path
from agentgym.trajectory import load_trajectories

from .conftest import SHORT_CHAT

STATUS = r"(\d+)/(\d+) {unit} \(\d+%\)  elapsed [\d:]+  eta [\d:?]+"


def test_train_command_saves_trajectories_and_logs_a_line_per_iteration(tmp_path, toy_config, sft_model_dir, capsys):
    from agentgym.trainers.cli import train_command
    from agentgym.trainers.config import save_config
    from agentgym.trainers.estimators import compute_advantages

    cfg = toy_config(tmp_path, sft_model_dir, "log.save_trajectories_every=2", "iterations=2", "checkpoint_every=0")
    save_config(cfg, tmp_path / "cfg.yaml")
    train_command(str(tmp_path / "cfg.yaml"), [], None, False)
    out = capsys.readouterr().out
    rl = [line for line in out.splitlines() if line.startswith("RL ")]
    assert len(rl) == 2, out
    for k, line in enumerate(rl, 1):
        match = re.match("RL " + STATUS.format(unit="iterations") + "  train success", line)
        assert match and match.groups() == (str(k), "2"), line
    run = tmp_path / "run"
    assert train_path(run, 1).is_file() and train_path(run, 2).is_file()  # the first one and every 2nd
    assert (eval_dir(run, 0) / "report.json").is_file() and (eval_dir(run, 2) / "trajectories.jsonl").is_file()
    trajs = load_trajectories(train_path(run, 2))
    assert len(trajs) == cfg.rollout.tasks_per_iter * cfg.rollout.group_size
    est = cfg.estimator
    for traj, adv in zip(trajs, compute_advantages(trajs, est)):  # the estimator is a pure function of the episodes
        saved = traj.metadata["advantage"]
        np.testing.assert_allclose(saved["total"], adv, atol=1e-6)
        assert traj.metadata["iteration"] == 2 and traj.metadata["estimator"] == est.name
        assert [len(t) for t in traj.metadata["tokens"]] == [len(s.response_ids) for s in traj.steps]
        assert all(s.response_logprobs and len(s.response_logprobs) == len(s.response_ids) for s in traj.steps)


def test_sft_logs_a_line_per_epoch(tiny_policy_factory, toy_env_id):
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories, sft_samples, train_sft

    policy = tiny_policy_factory()
    trajs = oracle_trajectories(toy_env_id, get_task_space(toy_env_id).split("train")[:4], SHORT_CHAT, None)
    samples = sft_samples(policy, trajs)
    out = io.StringIO()
    with progress.session(stream=out, mode="plain"):
        train_sft(policy, samples, epochs=3, lr=1e-3, batch_size=4)
    lines = out.getvalue().splitlines()
    steps = 3 * -(-len(samples) // 4)
    sft = [line for line in lines if line.startswith("SFT ")]
    assert len(sft) == 3, lines
    for k, line in enumerate(sft, 1):
        match = re.match("SFT " + STATUS.format(unit="steps") + rf"  epoch {k}/3 loss \d+\.\d+$", line)
        assert match and match.groups() == (str(k * steps // 3), str(steps)), line
