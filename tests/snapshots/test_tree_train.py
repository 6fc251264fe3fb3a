"""`agentgym train household-tiny estimator.name=tree` trains from tree rollouts: its iterations
collect branch episodes (the trainer asks collect for them) and it runs to its end."""

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

TINY = ["iterations=1", "tiny.num_tasks=6", "tiny.vocab_size=300", "tiny.hidden=32", "tiny.heads=2",
        "sft.num_tasks=6", "sft.epochs=1", "eval.num_tasks=3", "rollout.tasks_per_iter=2", "rollout.group_size=2",
        "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "torch_threads=1", "env.fresh_tasks=0",
        "log.plot=false", "log.save_trajectories_every=0", "env.env_kwargs.max_episode_steps=6",
        "sft.enabled=false"]  # 6 steps: too few for the demonstrator, so no SFT (it would have nothing to imitate)


@pytest.mark.slow
def test_train_household_tiny_with_the_tree_estimator(tmp_path):
    from agentgym.cli import app

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "household-tiny", "estimator.name=tree", "estimator.options.k=2",
                                      "estimator.options.every=3", *TINY, "--run-dir", str(run)])
    text = result.output + (repr(result.exception) if result.exception and not isinstance(result.exception, SystemExit)
                            else "")
    assert result.exit_code == 0, text
    assert json.loads((run / "summary.json").read_text())["iterations"] == 1
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    episodes = [r["rollout/episodes"] for r in rows if "rollout/episodes" in r]
    # 4 episodes of at most 6 steps, branched at steps 0 and 3 (where reached) with 2 branches each
    assert len(episodes) == 1 and 4 + 4 * 2 <= episodes[0] <= 4 + 4 * 2 * 2, episodes
