"""Issue 40's "Done when": `agentgym train household-tiny estimator.name=X` runs for each new
estimator, and the update of that run calls the policy loss X declares (trainers/policy_losses.py),
not PPO's. Tiny overrides keep each run to seconds on a CPU."""

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

TINY = ["iterations=1", "tiny.num_tasks=6", "tiny.vocab_size=300", "tiny.hidden=32", "tiny.heads=2",
        "sft.num_tasks=6", "sft.epochs=1", "eval.num_tasks=3", "rollout.tasks_per_iter=2", "rollout.group_size=2",
        "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "torch_threads=1", "env.fresh_tasks=0",
        "log.plot=false", "log.save_trajectories_every=0",
        # an untrained model fails every episode, so most advantages are 0: keep those samples in
        # the loss so the declared loss is called (DAPO drops them itself: its overlong penalty
        # gives it non-zero advantages on the model's 12-token replies)
        "ppo.drop_abs_adv_below=0"]

NEW = {"dapo": ["estimator.options.overlong_max=12"], "dr_grpo": [], "gspo": [], "reinforce_pp": [], "cispo": []}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEW))
def test_train_household_tiny_runs_each_new_estimator(name, tmp_path, monkeypatch):
    from agentgym.cli import app
    from agentgym.trainers import policy_losses

    declared = policy_losses.POLICY_LOSSES[name]
    calls = []

    def spy(*args, **kwargs):
        calls.append(args[2].abs().max().item())  # the advantages it was given
        return declared(*args, **kwargs)

    monkeypatch.setitem(policy_losses.POLICY_LOSSES, name, spy)
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "household-tiny", f"estimator.name={name}", *TINY, *NEW[name],
                                      "--run-dir", str(run)])
    text = result.output + (repr(result.exception) if result.exception and not isinstance(result.exception, SystemExit)
                            else "")
    assert result.exit_code == 0, text
    summary = json.loads((run / "summary.json").read_text())
    assert summary["iterations"] == 1, summary
    assert calls, f"the run's update never called {name}'s declared loss"
    if name in ("dapo", "reinforce_pp"):  # the two with a signal on an untrained model (docs/rewards.md)
        assert max(calls) > 0, calls
