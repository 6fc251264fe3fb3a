"""Config loading and its one-line errors; exact resume of a training run."""

import json

import numpy as np

import pytest

from agentgym.errors import AgentGymError, ConfigError, HeldoutTaskError
from agentgym.trainers.config import list_presets, load_config, parse_overrides
from agentgym.tasks import validation as _validation


def test_overrides_are_typed_and_nested():
    tree = parse_overrides(["estimator.name=grpo", "ppo.lr=1e-4", "rollout.group_size=4", "policy.lora={}",
                            "env.chat.history=full", "tiny.build=true"])
    assert tree["estimator"]["name"] == "grpo" and tree["rollout"]["group_size"] == 4
    cfg = load_config(None, ["estimator.name=grpo", "ppo.lr=1e-4", "tiny.build=true", "env.chat.history=full",
                             "ppo.sample_mode=full", "policy.lora={}"])
    assert cfg.ppo.lr == pytest.approx(1e-4) and isinstance(cfg.ppo.lr, float)
    assert cfg.env.chat.history == "full" and cfg.env.chat.memory == 0 and cfg.policy.lora == {}


def test_a_path_given_to_resume_is_told_where_a_run_dir_goes():
    """`agentgym train PRESET --resume runs/x` read the path as an override and said only that it
    was not key=value."""
    with pytest.raises(ConfigError, match=r"a run dir is given as --run-dir PATH \(--resume and --overwrite"):
        parse_overrides(["runs/x"])
    with pytest.raises(ConfigError) as plain:
        parse_overrides(["grpo"])
    assert "--run-dir" not in str(plain.value)


def test_dict_fields_merge_into_their_defaults():
    cfg = load_config(None, ["tiny.build=true", "estimator.omega=0.5"])
    assert (cfg.estimator.name, cfg.estimator.omega, cfg.estimator.gamma) == ("gigpo", 0.5, 0.95)
    assert load_config("household-tiny", ["env.chat.history=2"]).env.chat.parser == "raw"


def test_household_tiny_preset_loads():
    assert "household-tiny" in list_presets()
    cfg = load_config("household-tiny", ["estimator.name=grpo"])
    assert cfg.estimator.name == "grpo" and cfg.tiny.build and cfg.sft.enabled


@pytest.mark.parametrize("overrides, message", [
    (["tiny.build=true", "estimator.name=magic"], "unknown .*estimator 'magic'"),
    (["policy.model=./definitely/not/here"], "does not exist"),
    ([], "no model"),
    (["tiny.build=true", "rollout.group_size=1"], "group_size >= 2"),
    (["tiny.build=true", "rollout.group_size=1", "estimator.name=loop"], "group_size >= 2"),
    (["tiny.build=true", "env.split=heldout"], "only the train split"),
    (["tiny.build=true", "ppo.epochs=0"], "ppo.epochs"),
    (["tiny.build=true", "ppo.lr=fast"], "must be a number"),
    (["tiny.build=true", "ppo.learning_rate=1"], "unknown key ppo.learning_rate"),
    (["tiny.build=true", "ppo.sample_mode=full"], "history=full"),
    (["tiny.build=true", "oops"], "key=value"),
    (["tiny.build=true", "sft.expert=genius"], "sft.expert must be 'oracle' or 'searching'"),
    (["tiny.build=true", "estimator.omgea=0.5"], "unknown key estimator.omgea: did you mean estimator.omega"),
    (["tiny.build=true", "estimator.gamma=1.5"], "gamma=1.5 is out of range"),
    (["tiny.build=true", "estimator.penalty_placement=later"], "penalty_placement"),
])
def test_bad_configs_give_one_line_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(None, overrides)
    assert "\n" not in str(info.value)


def test_unknown_preset_names_the_presets():
    with pytest.raises(ConfigError, match="household-tiny"):
        load_config("no-such-preset")


def test_ppo_with_group_size_one_is_fine():
    assert load_config(None, ["tiny.build=true", "rollout.group_size=1", "estimator.name=ppo"]).rollout.group_size == 1


def test_heldout_tasks_in_a_task_file_are_refused(tmp_path, toy_env_id, toy_config, tiny_model_dir):
    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import save_split
    from agentgym.trainers.task_selection import select_train_tasks

    space = get_task_space(toy_env_id)
    save_split(tmp_path / "tasks.jsonl", space.split("train")[:2] + space.split("heldout")[:1])
    cfg = toy_config(tmp_path, tiny_model_dir, f"env.tasks_file={tmp_path}/tasks.jsonl")
    with pytest.raises(HeldoutTaskError, match="held-out"):
        select_train_tasks(cfg.env, space, cfg.seed)
    assert issubclass(HeldoutTaskError, AgentGymError)


@pytest.mark.parametrize("tasks", [(), ("tasks.curriculum=sec",), ("tasks.source=evolve", "tasks.curriculum=dump")])
def test_resume_is_exact(tmp_path, toy_config, sft_model_dir, tasks):
    """train 2 iterations == train 1, stop, resume, train 1 more: the same parameters, bit for bit
    (task source and curriculum state included)."""
    import torch
    from safetensors.torch import load_file

    from agentgym.trainers.training import train

    straight = toy_config(tmp_path / "a", sft_model_dir, "iterations=2", *tasks)
    train(straight, log=lambda _: None)
    first = toy_config(tmp_path / "b", sft_model_dir, "iterations=1", *tasks)
    train(first, log=lambda _: None)
    second = toy_config(tmp_path / "b", sft_model_dir, "iterations=2", *tasks)
    summary = train(second, resume=True, log=lambda _: None)
    assert summary["iterations"] == 2
    a = load_file(str(tmp_path / "a" / "run" / "final_model" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "run" / "final_model" / "model.safetensors"))
    start = load_file(str(sft_model_dir / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], start[k]) for k in a)  # training did change the weights
    # the training records of the resumed run read like those of the uninterrupted one
    def rows(d):
        records = [json.loads(line) for line in (d / "run" / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if "time" not in k and "wall" not in k} for r in records if "iteration" in r]

    assert len(rows(tmp_path / "a")) == 2
    assert rows(tmp_path / "a") == rows(tmp_path / "b")


def test_a_new_run_never_deletes_an_earlier_one(tmp_path, toy_config, sft_model_dir):
    """Issue 53: a second run in a used run dir is refused in one line naming --resume, --run-dir and
    --overwrite, and the first run (metrics, summary, checkpoints, final model) is left intact."""
    from agentgym.errors import ConfigError
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.training import train

    train(toy_config(tmp_path, sft_model_dir, "iterations=3"), log=lambda _: None)
    run = tmp_path / "run"
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match="--overwrite") as refused:
        train(toy_config(tmp_path, sft_model_dir, "iterations=1"), log=lambda _: None)
    assert "--resume" in str(refused.value) and "--run-dir" in str(refused.value)
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert latest_checkpoint(run).name == "iter_000003" and (run / "final_model").is_dir()


def test_a_run_killed_before_its_first_iteration_resumes_after_its_evaluation(tmp_path, toy_config, sft_model_dir,
                                                                              monkeypatch):
    """The evaluation before RL is checkpointed (a real model's takes an hour here): a run killed in
    its first iteration does not evaluate again when resumed, and keeps that evaluation as its first."""
    import agentgym.trainers.training as training

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    cfg = toy_config(tmp_path, sft_model_dir, "iterations=2", "checkpoint_every=2")
    run_iteration = training.run_iteration
    monkeypatch.setattr(training, "run_iteration", killed)
    with pytest.raises(KeyboardInterrupt):
        training.train(cfg, log=lambda _: None)
    first = json.loads((tmp_path / "run" / "checkpoints" / "iter_000000" / "state.json").read_text())["evals"]
    assert len(first) == 1 and first[0]["iteration"] == 0
    calls = []
    heldout_result = training.heldout_result
    monkeypatch.setattr(training, "run_iteration", run_iteration)
    monkeypatch.setattr(training, "heldout_result", lambda *a, **k: calls.append(1) or heldout_result(*a, **k))
    summary = training.train(cfg, log=lambda _: None, resume=True)
    assert summary["iterations"] == 2 and len(calls) == 1  # the final evaluation only
    evals = json.loads((tmp_path / "run" / "checkpoints" / "iter_000002" / "state.json").read_text())["evals"]
    assert [e["iteration"] for e in evals] == [0, 2] and evals[0] == first[0]


def test_overwrite_starts_clean_in_a_used_run_dir(tmp_path, toy_config, sft_model_dir):
    """--overwrite: the old run's metrics are not appended to (they would mix two runs in one
    learning curve) and its later checkpoints cannot be resumed by mistake."""
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.training import train
    from agentgym.trainers.run_setup import clear_previous_run

    train(toy_config(tmp_path, sft_model_dir, "iterations=3"), log=lambda _: None)
    assert latest_checkpoint(tmp_path / "run").name == "iter_000003"
    train(toy_config(tmp_path, sft_model_dir, "iterations=1"), log=lambda _: None, overwrite=True)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records if "iteration" in r] == [1]
    assert latest_checkpoint(tmp_path / "run").name == "iter_000001"
    # the new run's own: after its evaluation before RL, and after its iteration
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("iter_*")) == ["iter_000000", "iter_000001"]
    # a folder no run wrote a config into is left alone, whatever it holds
    other = tmp_path / "not_a_run"
    (other / "checkpoints").mkdir(parents=True)
    assert clear_previous_run(other) == [] and (other / "checkpoints").is_dir()


def test_fresh_training_tasks_follow_the_category_filter_and_exclude_task_files(tmp_path):
    from agentgym.registration import get_task_space
    from agentgym.trainers.task_selection import select_train_tasks

    space = get_task_space("agentgym/Household-v0")
    cfg = load_config(None, ["tiny.build=true", "env.fresh_tasks=50", "env.categories=[look_at_obj_in_light/easy]"])
    tasks = select_train_tasks(cfg.env, space, cfg.seed)
    assert len(tasks) == 50 and {space.category(t) for t in tasks} == {"look_at_obj_in_light/easy"}
    assert not {t.task_id for t in tasks} & _validation.heldout_ids(space)
    with pytest.raises(ConfigError, match="set only one"):
        load_config(None, ["tiny.build=true", "env.fresh_tasks=50", f"env.tasks_file={tmp_path}/t.jsonl"])


def test_a_slipping_oracle_recovers_and_sft_learns_only_its_valid_steps():
    # The oracle "slips" with an out-of-turn plan step ("Nothing happens.") and then goes on with
    # its plan: every episode still succeeds, and SFT targets are exactly the plan's steps.
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories, sft_samples

    env_id = "agentgym/Household-v0"
    space = get_task_space(env_id)
    tasks = space.split("train")[:20]
    chat = {"parser": "raw", "history": 0, "system_prompt": ""}
    trajs = oracle_trajectories(env_id, tasks, chat, {"max_episode_steps": 60}, seed=3, slip_prob=0.5)
    assert len(trajs) == len(tasks)
    slips = 0
    for traj in trajs:
        plan = space.solve(next(t for t in tasks if t.task_id == traj.task_id))
        assert [s.action for s in traj.steps if s.action_valid] == plan
        for before, after in zip(traj.steps, traj.steps[1:]):
            if not before.action_valid:
                slips += 1
                assert after.observation == "Nothing happens." and before.action in plan
    assert slips >= 20

    class Encoder:  # sft_samples only needs the policy's tokenization
        def encode_prompt(self, messages):
            return [1, 2]

        def encode_response(self, text):
            return [3]

    assert len(sft_samples(Encoder(), trajs)) == sum(len(p) for p in (space.solve(t) for t in tasks))
    with pytest.raises(ConfigError, match="slip_prob"):
        load_config(None, ["tiny.build=true", "sft.slip_prob=1.5"])


def test_the_searching_expert_plays_a_new_search_each_episode():
    # Two episodes of one task search in different orders (the plain oracle replays one plan),
    # every episode succeeds, and an env family without a searching oracle is refused.
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories

    env_id = "agentgym/Household-v0"
    task = get_task_space(env_id).sample(np.random.default_rng(0), task_type="pick_and_place", level="easy")
    trajs = oracle_trajectories(env_id, [task] * 12, None, None, seed=1, slip_prob=0.2, search=True)
    assert len(trajs) == 12
    assert len({tuple(s.action for s in t.steps if s.action_valid) for t in trajs}) > 1
    plain = oracle_trajectories(env_id, [task] * 4, None, None, seed=1)
    assert len({tuple(s.action for s in t.steps) for t in plain}) == 1
    with pytest.raises(ValueError, match="no searching oracle"):
        OraclePolicy(get_task_space("agentgym/ToolUse-v0"), search=True)


def test_the_oracle_never_slips_where_it_cannot_tell_a_command_is_invalid():
    # Tool use has an open action space (no admissible list): an out-of-turn tool call could
    # change the state, so the slipping oracle plays its plan unchanged there.
    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories

    env_id = "agentgym/ToolUse-v0"
    tasks = get_task_space(env_id).split("train")[:10]
    trajs = oracle_trajectories(env_id, tasks, None, None, slip_prob=0.9)
    assert len(trajs) == len(tasks) and all(s.action_valid for t in trajs for s in t.steps)


def test_a_run_stopped_by_the_safety_budget_says_so(tmp_path, toy_config, sft_model_dir):
    """time_budget_s is a safety stop, not the experiment: the summary and the log's last word say
    that fewer iterations ran than configured; a run that finishes says nothing of the kind."""
    from agentgym.trainers.training import train

    lines = []
    summary = train(toy_config(tmp_path, sft_model_dir, "iterations=3", "time_budget_s=0.001"), log=lines.append)
    assert summary["iterations"] == 0 and summary["iterations_configured"] == 3
    assert "time_budget_s" in summary["stopped_early"] and "0 of 3 iterations" in summary["stopped_early"]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["stopped_early"] == summary["stopped_early"]
    assert any(line.startswith("WARNING") and "not the configured experiment" in line for line in lines)
    done = train(toy_config(tmp_path / "b", sft_model_dir, "iterations=1"), log=lambda _: None)
    assert done["stopped_early"] is None and done["iterations"] == 1
    # the final evaluation is paired with the first on the same tasks
    assert done["heldout_tasks"] == 2 and done["heldout_gain_ci"][0] <= done["heldout_gain"] <= done["heldout_gain_ci"][1]


def test_a_small_eval_set_warns_when_training_starts(tmp_path, toy_config, sft_model_dir):
    from agentgym.trainers.training import train

    lines = []
    train(toy_config(tmp_path, sft_model_dir, "iterations=0"), log=lines.append)
    assert any("held-out set is small" in line and "2 tasks x 1 episodes" in line for line in lines)


def test_dawdling_needs_the_searching_expert():
    with pytest.raises(ConfigError, match="sft.expert=searching"):
        load_config(None, ["tiny.build=true", "sft.dawdle_prob=0.3"])
    with pytest.raises(ConfigError, match="sft.dawdle_prob"):
        load_config(None, ["tiny.build=true", "sft.expert=searching", "sft.dawdle_prob=1.5"])


def test_resuming_a_finished_run_keeps_its_wall_time(tmp_path, toy_config, sft_model_dir):
    """Issue 53, item 6: --resume on a finished run used to rewrite wall_seconds to the resume's own
    few seconds; the run's wall time counts every session."""
    from agentgym.trainers.training import train

    first = train(toy_config(tmp_path, sft_model_dir, "iterations=2"), log=lambda _: None)
    again = train(toy_config(tmp_path, sft_model_dir, "iterations=2"), resume=True, log=lambda _: None)
    assert again["iterations"] == 2 and again["wall_seconds"] >= first["wall_seconds"] > 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["wall_seconds"] == again["wall_seconds"]
