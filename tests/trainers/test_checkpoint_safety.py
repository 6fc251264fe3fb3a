"""Issue 38: `--resume` never deletes, a checkpoint never runs code, and every corrupted
checkpoint is one line naming it and what is wrong (checked before anything is built)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from agentgym.errors import ConfigError
from agentgym.trainers.checkpoint import CheckpointError, latest_checkpoint


def _config(root: Path, model_dir, *overrides):
    from agentgym.trainers.config import load_config

    return load_config({"env": {"chat": {"history": 1, "system_prompt": "Act.", "show_admissible": True}}}, [
        "env.id=agentgym/TestCorridor-v0", f"policy.model={model_dir}", f"run_dir={root}/run", "iterations=1",
        "rollout.tasks_per_iter=2", "rollout.group_size=2", "rollout.max_new_tokens=8", "eval.every=0",
        "eval.num_tasks=2", "checkpoint_every=1", "log.plot=false", "log.tensorboard=false",
        "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "env.max_turns=3", *overrides])


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, toy_env_id, tiny_model_dir):
    """One real run with a checkpoint, copied afresh for each test."""
    from agentgym.trainers.training import train

    root = tmp_path_factory.mktemp("finished")
    train(_config(root, tiny_model_dir), log=lambda _: None)
    return root


@pytest.fixture
def run(finished_run, tmp_path, tiny_model_dir):
    shutil.copytree(finished_run / "run", tmp_path / "run", symlinks=True)
    return tmp_path / "run", _config(tmp_path, tiny_model_dir)


def _tree(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if not p.is_symlink())


def _one_line(exc: BaseException, *names: str) -> str:
    text = str(exc)
    assert "\n" not in text and isinstance(exc, ConfigError), text
    for name in names:
        assert name in text, (name, text)
    return text


POINTERS = {
    "missing folder": b"iter_000999",
    "empty": b"",
    "binary": b"\xff\xfe\x00\x01iter",
    "outside": b"../../etc",
}


@pytest.mark.parametrize("case", [*POINTERS, "symlink loop", "no checkpoints at all"])
def test_resume_with_a_broken_latest_never_deletes(run, case):
    from agentgym.trainers.training import train

    run_dir, cfg = run
    ckpts = run_dir / "checkpoints"
    name = (ckpts / "latest").read_text().strip()
    if case in POINTERS:
        (ckpts / "latest").write_bytes(POINTERS[case])
    elif case == "symlink loop":
        shutil.rmtree(ckpts / name)
        os.symlink(name, ckpts / name)  # a link to itself
    else:
        shutil.rmtree(ckpts)
    before = _tree(run_dir)
    assert {"metrics.jsonl", "summary.json", "final_model"} <= set(before)
    # a link among the run's own files is refused before anything is read (run_setup.prepare_run_dir)
    refusal = ConfigError if case == "symlink loop" else CheckpointError
    with pytest.raises(refusal) as err:
        train(cfg, resume=True, log=lambda _: None)
    _one_line(err.value, str(run_dir))
    assert _tree(run_dir) == before, "a resume removed files"


def _corrupt(ckpt: Path, case: str) -> None:
    trainer, state = ckpt / "trainer.pt", ckpt / "state.json"
    weights = next((ckpt / "model").glob("*.safetensors"))
    if case == "trainer.pt truncated":
        trainer.write_bytes(trainer.read_bytes()[:200])
    elif case == "trainer.pt random":
        trainer.write_bytes(os.urandom(4096))
    elif case == "trainer.pt empty":
        trainer.write_bytes(b"")
    elif case == "trainer.pt missing keys":
        torch.save({"optimizer": None}, trainer)
    elif case == "state.json truncated":
        state.write_text(state.read_text()[:5])
    elif case == "state.json {}":
        state.write_text("{}")
    elif case == "state.json NaN":
        state.write_text('{"iteration": NaN, "evals": []}')
    elif case == "state.json binary":
        state.write_bytes(b"\xff\xfe\x00")
    elif case == "safetensors truncated":
        weights.write_bytes(weights.read_bytes()[:1000])
    elif case == "safetensors header nested too deeply":  # a RecursionError in json.loads
        header = b"[" * 50_000 + b"]" * 50_000
        weights.write_bytes(len(header).to_bytes(8, "little") + header)
    elif case == "model folder missing":
        shutil.rmtree(ckpt / "model")


CORRUPTIONS = ["trainer.pt truncated", "trainer.pt random", "trainer.pt empty", "trainer.pt missing keys",
               "state.json truncated", "state.json {}", "state.json NaN", "state.json binary",
               "safetensors truncated", "safetensors header nested too deeply", "model folder missing"]


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_a_corrupted_checkpoint_is_one_line_naming_it(run, case):
    run_dir, _ = run
    ckpt = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()
    _corrupt(ckpt, case)
    with pytest.raises(CheckpointError) as err:
        latest_checkpoint(run_dir)
    _one_line(err.value, str(ckpt))


def test_resume_through_the_loop_stops_before_touching_anything(run):
    """The same through train(): one line, and the run dir is as it was."""
    from agentgym.trainers.training import train

    run_dir, cfg = run
    ckpt = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()
    _corrupt(ckpt, "trainer.pt empty")
    before = _tree(run_dir)
    with pytest.raises(CheckpointError):
        train(cfg, resume=True, log=lambda _: None)
    assert _tree(run_dir) == before


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['AGENTGYM_TEST_MARKER']}",))


def test_a_crafted_trainer_pt_runs_no_code(run, tmp_path, monkeypatch, tiny_policy_factory):
    from agentgym.trainers.checkpoint import load_checkpoint

    run_dir, _ = run
    ckpt = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()
    marker = tmp_path / "pwned"
    monkeypatch.setenv("AGENTGYM_TEST_MARKER", str(marker))
    blob = torch.load(ckpt / "trainer.pt", weights_only=False)  # our own file, trusted here
    blob["policy_last_seed"] = _Payload()
    torch.save(blob, ckpt / "trainer.pt")
    policy = tiny_policy_factory()
    optimizer = torch.optim.AdamW(policy.trainable_parameters())
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(ckpt, policy, optimizer, None, {}, weights=False)
    _one_line(err.value, "trainer.pt")
    with pytest.raises(CheckpointError):
        latest_checkpoint(run_dir)
    assert not marker.exists(), "loading the checkpoint ran code from it"


def test_an_intact_checkpoint_still_resumes_and_changed_settings_are_refused(run):
    from agentgym.trainers.checkpoint import check_resume

    run_dir, cfg = run
    assert check_resume(run_dir, cfg.to_dict()) == latest_checkpoint(run_dir) and latest_checkpoint(run_dir).is_dir()
    cfg.policy.lora = {"r": 4}
    with pytest.raises(CheckpointError) as err:
        check_resume(run_dir, cfg.to_dict())
    _one_line(err.value, "policy.lora")


def test_resume_hint_with_a_broken_pointer_is_one_line(run):
    from agentgym.trainers.cli import resume_hint

    run_dir, cfg = run
    (run_dir / "checkpoints" / "latest").write_bytes(b"\x00\x01")
    line = resume_hint(cfg, ["x"])
    assert "\n" not in line and "latest" in line


def test_a_trainer_state_that_does_not_fit_this_run_is_one_line(run, tiny_policy_factory):
    """The optimizer of another layout (a changed config reaching load_checkpoint): one line."""
    from agentgym.trainers.checkpoint import load_checkpoint

    run_dir, _ = run
    ckpt = latest_checkpoint(run_dir)
    policy = tiny_policy_factory()
    params = list(policy.trainable_parameters())
    optimizer = torch.optim.AdamW([{"params": params[:1]}, {"params": params[1:]}, {"params": []}])
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(ckpt, policy, optimizer, None, {}, weights=False)
    _one_line(err.value, str(ckpt), "config")


def test_the_sampler_state_keeps_its_keys_and_a_resumed_policy_samples_on(run, tiny_policy_factory):
    """trainer.pt and ranks.pt keep the sampler under policy_rng / policy_last_seed (checkpoints
    written before the public sampling_state() load unchanged), and a policy restored from either
    continues the saved sampler: same draw, and its seed is not applied again."""
    from agentgym.policies.base import SamplingParams
    from agentgym.trainers.checkpoint import load_checkpoint, rng_state
    from agentgym.trainers.distributed import DataParallel

    run_dir, _ = run
    ckpt = latest_checkpoint(run_dir)
    blob = torch.load(ckpt / "trainer.pt", weights_only=False)  # our own file, trusted here
    assert {"policy_rng", "policy_last_seed"} <= blob.keys()
    saved = tiny_policy_factory()
    prompt = [saved.encode_prompt([{"role": "user", "content": "go"}])]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=6, seed=123)
    first = saved.generate_ids(prompt, sampling)[0].response_ids
    state = saved.sampling_state()
    expected = saved.generate_ids(prompt, sampling)[0].response_ids
    assert expected != first  # else the check below could not tell a continued sampler from a reseeded one
    blob["policy_rng"], blob["policy_last_seed"] = state["rng"], state["last_seed"]
    torch.save(blob, ckpt / "trainer.pt")

    resumed = tiny_policy_factory()
    load_checkpoint(ckpt, resumed, torch.optim.AdamW(resumed.trainable_parameters()), None, {}, weights=False)
    assert resumed.generate_ids(prompt, sampling)[0].response_ids == expected

    mine = {"rng": rng_state(), "policy_rng": state["rng"], "policy_last_seed": state["last_seed"]}
    torch.save({"world_size": 2, "sharded": False, "ranks": [mine, mine]}, ckpt / "ranks.pt")
    rank = tiny_policy_factory()
    DataParallel(rank=0, world_size=2).restore_rank_state(ckpt, rank, log=lambda _: None)
    assert rank.generate_ids(prompt, sampling)[0].response_ids == expected


def test_crafted_per_rank_state_and_optimizer_shard_run_no_code(run, tmp_path, monkeypatch, tiny_policy_factory):
    """ranks.pt (data parallel) and optimizer_rankN.pt (FSDP) are read like trainer.pt: a pickle
    that would run code is one line, and nothing runs."""
    from agentgym.trainers.distributed import DataParallel
    from agentgym.trainers.fsdp import load_optimizer_shard

    run_dir, _ = run
    ckpt = latest_checkpoint(run_dir)
    marker = tmp_path / "pwned"
    monkeypatch.setenv("AGENTGYM_TEST_MARKER", str(marker))
    torch.save({"world_size": 2, "sharded": False, "ranks": [_Payload(), _Payload()]}, ckpt / "ranks.pt")
    torch.save({"state": {0: {"step": _Payload()}}, "param_groups": []}, ckpt / "optimizer_rank0.pt")
    with pytest.raises(CheckpointError) as err:
        DataParallel(rank=0, world_size=2).check_checkpoint(ckpt)
    _one_line(err.value, "ranks.pt")
    with pytest.raises(CheckpointError) as err:
        DataParallel(rank=0, world_size=2).restore_rank_state(ckpt, tiny_policy_factory(), log=lambda _: None)
    _one_line(err.value, "ranks.pt")
    policy = tiny_policy_factory()
    with pytest.raises(CheckpointError) as err:
        load_optimizer_shard(torch.optim.AdamW(policy.trainable_parameters()), ckpt / "optimizer_rank0.pt")
    _one_line(err.value, "optimizer_rank0.pt")
    assert not marker.exists(), "loading a per-rank file ran code from it"


def test_agentgym_train_resume_from_an_empty_trainer_pt_is_one_line(run, monkeypatch, capsys):
    """What the user saw in issue 38: `agentgym train ... --resume` on an empty trainer.pt exited
    130 with no message. Now: exit 2, one line naming the file, the run dir untouched."""
    from agentgym import cli

    run_dir, _ = run
    ckpt = latest_checkpoint(run_dir)
    _corrupt(ckpt, "trainer.pt empty")
    before = _tree(run_dir)
    monkeypatch.setattr("sys.argv", ["agentgym", "train", str(run_dir / "config.yaml"), "--run-dir", str(run_dir),
                                     "--resume"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert exit_.value.code == 2 and len(err) == 1 and "trainer.pt" in err[0] and "empty" in err[0], err
    assert _tree(run_dir) == before
