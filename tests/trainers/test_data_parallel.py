"""Data-parallel training (trainers/distributed.py): 2 gloo ranks on CPU give the parameters of
one process on the combined batch; groups never span ranks; bad world sizes fail in one line."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentgym.errors import ConfigError  # noqa: E402

WORKER = Path(__file__).with_name("dp_worker.py")
GROUP = 2
# Parameters after one update (2 epochs x 3 minibatches = 6 AdamW steps at lr 1e-3) agree to this
# absolute tolerance. Ranks only reorder float32 sums (and pad micro-batches differently); Adam turns
# that into at most ~2e-6 on a few of 100k weights (those with near-zero gradients), while the
# update itself moves weights by up to 6e-3 and training on half the batch lands ~9e-3 away.
ATOL = 1e-5


def _env(threads: str = "1") -> dict:
    # the repo first, then what was there (the GPU check's wheels travel on PYTHONPATH)
    path = os.pathsep.join(p for p in (str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, OMP_NUM_THREADS=threads, PYTHONPATH=path)
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    return env


def _run(args: list[str], nproc: int = 1, timeout: float = 240):
    cmd = [sys.executable] + (["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
                              if nproc > 1 else []) + args
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def batch(tmp_path_factory, tiny_model_dir, toy_env_id):
    """4 groups x 2 episodes sampled from the tiny model, with made-up non-zero advantages."""
    import agentgym
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space

    from .conftest import SHORT_CHAT

    tasks = get_task_space(toy_env_id).split("train")[:4]
    trajs = agentgym.collect(toy_env_id, tasks, HFPolicy(tiny_model_dir), GROUP, seed=3, chat=SHORT_CHAT,
                             sampling=SamplingParams(temperature=1.0, max_new_tokens=8, seed=0), max_turns=3)
    rng = np.random.default_rng(0)
    advs = [rng.normal(size=len(t.steps)).astype(np.float32) for t in trajs]
    path = tmp_path_factory.mktemp("dp") / "batch.pkl"
    path.write_bytes(pickle.dumps((trajs, advs)))
    return path


VARIANTS = ("full", "lora", "value-head")  # dp_worker.py's


@pytest.fixture(scope="module")
def one_process(batch, tiny_model_dir, tmp_path_factory) -> Path:
    """The one-process update of every variant, in one process for the module: the references each
    data-parallel layout is compared with (VARIANT.pt in the folder returned), and `full` on the
    first half of the batch (full-2.pt)."""
    out = tmp_path_factory.mktemp("one")
    _run([str(WORKER), str(tiny_model_dir), str(batch), str(out), str(GROUP),
          "--variants=" + ",".join([*VARIANTS, "full:2"])])
    return out


@pytest.fixture(scope="module")
def two_ranks(batch, tiny_model_dir, tmp_path_factory) -> Path:
    """`full` on two ddp ranks (full-ddp.pt), then every variant on two FSDP ranks
    (VARIANT-fsdp.pt), in one torchrun launch for the module."""
    out = tmp_path_factory.mktemp("two")
    _run([str(WORKER), str(tiny_model_dir), str(batch), str(out), str(GROUP),
          "--variants=" + ",".join(["full:ddp", *(f"{v}:fsdp" for v in VARIANTS)])], nproc=2)
    return out


def test_two_gloo_ranks_equal_one_process_on_the_combined_batch(one_process, two_ranks):
    one, two, half = one_process / "full.pt", two_ranks / "full-ddp.pt", one_process / "full-2.pt"
    a, b, h = (torch.load(p, weights_only=False) for p in (one, two, half))
    assert b["world_size"] == 2 and 0 < b["local_samples"] < a["local_samples"]
    assert b["numel_held"] == a["numel_held"]  # ddp: a whole replica on each rank
    assert a["stats"]["optimizer_steps"] == b["stats"]["optimizer_steps"] >= 4
    diff = max(float((a["params"][k] - b["params"][k]).abs().max()) for k in a["params"])
    moved = max(float((a["params"][k] - h["params"][k]).abs().max()) for k in a["params"])
    assert diff < ATOL, f"max |param diff| 1 vs 2 processes: {diff:.2e}"
    assert moved > 100 * ATOL, f"the half batch should train differently: {moved:.2e}"
    assert abs(a["stats"]["pg_loss"] - b["stats"]["pg_loss"]) < 1e-5
    assert abs(a["stats"]["grad_norm"] - b["stats"]["grad_norm"]) < 1e-4 * max(1.0, a["stats"]["grad_norm"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_two_fsdp_ranks_equal_one_process_on_the_combined_batch(variant, one_process, two_ranks):
    """data_parallel=fsdp: each rank holds half of every layer's parameters, gradients and AdamW
    moments; after the same update the gathered weights are one process's, to the ddp tolerance.
    The ranks' micro-batch counts differ (3 vs 2 samples per rank in some minibatches), so the
    filler passes are exercised; with a value head (gae) the replicated head and the sharded
    model share one clipping norm."""
    a = torch.load(one_process / f"{variant}.pt", weights_only=False)
    b = torch.load(two_ranks / f"{variant}-fsdp.pt", weights_only=False)
    assert b["world_size"] == 2 and a["stats"]["optimizer_steps"] == b["stats"]["optimizer_steps"] >= 4
    assert b["numel_held"] <= 0.51 * a["numel_held"]  # rank 0 holds half of the weights
    trained = [k for k in a["params"] if "lora_" in k] if variant == "lora" else list(a["params"])
    assert trained and (variant != "value-head" or any(k.startswith("value_head.") for k in trained))
    diff = max(float((a["params"][k] - b["params"][k]).abs().max()) for k in trained)
    assert diff < ATOL, f"max |param diff| 1 process vs 2 FSDP ranks: {diff:.2e}"
    assert abs(a["stats"]["pg_loss"] - b["stats"]["pg_loss"]) < 1e-5
    assert abs(a["stats"]["grad_norm"] - b["stats"]["grad_norm"]) < 1e-4 * max(1.0, a["stats"]["grad_norm"])


def test_fsdp_with_another_rollout_engine_is_refused_in_one_line():
    from agentgym.trainers.config import load_config

    with pytest.raises(ConfigError, match="data_parallel=fsdp shards the trainer's own model, but policy.engine=ray"):
        load_config("household-tiny", ["data_parallel=fsdp", "policy.engine=ray"])


@pytest.mark.parametrize("saved,now,hint", [
    ({"world_size": 2, "ranks": [], "sharded": True}, (2, False), "resume with data_parallel=fsdp --nproc 2"),
    ({"world_size": 2, "ranks": [], "sharded": True}, (4, True), "resume with data_parallel=fsdp --nproc 2"),
    ({"world_size": 2, "ranks": []}, (2, True), "resume with data_parallel=ddp"),  # saved before fsdp existed
])
def test_a_checkpoint_resumes_only_with_the_optimizer_layout_it_was_saved_with(tmp_path, saved, now, hint):
    from agentgym.trainers.distributed import DataParallel

    torch.save(saved, tmp_path / "ranks.pt")
    with pytest.raises(ConfigError, match=hint) as err:
        DataParallel(0, now[0], sharded=now[1]).check_checkpoint(tmp_path)
    assert "\n" not in str(err.value)
    DataParallel(0, saved["world_size"], sharded=saved.get("sharded", False)).check_checkpoint(tmp_path)  # as saved: fine


def test_shards_are_contiguous_whole_groups():
    from agentgym.trainers.distributed import DataParallel

    tasks = list(range(8))
    shards = [DataParallel(r, 4).shard(tasks) for r in range(4)]
    assert shards == [([0, 1], 0), ([2, 3], 2), ([4, 5], 4), ([6, 7], 6)]
    assert DataParallel().shard(tasks) == (tasks, 0)


def test_world_size_not_dividing_the_groups_is_one_line(toy_config, tiny_model_dir, tmp_path):
    from agentgym.trainers.distributed import check_world

    cfg = toy_config(tmp_path, tiny_model_dir, "rollout.tasks_per_iter=8")
    with pytest.raises(ConfigError, match=r"rollout.tasks_per_iter=8 groups cannot be split evenly over 3 ranks"):
        check_world(cfg, 3)
    check_world(cfg, 4)
    spa = toy_config(tmp_path, tiny_model_dir, "estimator.name=spa")
    with pytest.raises(ConfigError, match="train spa on one process"):
        check_world(spa, 2)


def test_agentgym_train_nproc_refuses_a_bad_world_size_before_starting(tmp_path, tiny_model_dir, toy_env_id):
    proc = subprocess.run([sys.executable, "-m", "agentgym.cli", "train", "household-tiny", "rollout.tasks_per_iter=8",
                           f"run_dir={tmp_path}/run", "--nproc", "3"], env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot be split evenly over 3 ranks" in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


TINY_HOUSEHOLD = [
    "iterations=2", "checkpoint_every=1", "torch_threads=1", "estimator.name=grpo", "sft.enabled=false",
    "tiny.vocab_size=300", "tiny.hidden=32", "tiny.layers=1", "tiny.heads=2", "tiny.num_tasks=6",
    "env.fresh_tasks=0", "env.env_kwargs.max_episode_steps=3", "rollout.tasks_per_iter=2", "rollout.group_size=2",
    "rollout.max_new_tokens=6", "ppo.minibatch_size=4", "ppo.micro_batch_size=4", "eval.every=0", "eval.num_tasks=2",
    "eval.episodes_per_task=1", "time_budget_s=null", "log.plot=false",
    # an untrained model fails every episode (all advantages 0): the entropy bonus still moves the weights
    "ppo.drop_abs_adv_below=0", "ppo.entropy_coef=0.01",
]


def _final_params(run_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "final_model" / "model.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("data_parallel", ["ddp", "fsdp"])
def test_torchrun_training_runs_and_resumes_exactly_for_the_same_world_size(tmp_path, data_parallel):
    """`agentgym train --nproc 2` (2 gloo ranks) runs 2 iterations; a second run resumed from the
    first run's iteration-1 checkpoint under `torchrun -m agentgym.trainers.cli` ends bit for bit
    at the same parameters and logs the same second iteration. With fsdp the checkpoint holds the
    gathered weights and one optimizer shard per rank."""
    import json
    import shutil

    from safetensors.torch import load_file

    full = tmp_path / "full"
    proc = subprocess.run([sys.executable, "-m", "agentgym.cli", "train", "household-tiny", *TINY_HOUSEHOLD,
                           f"run_dir={full}", f"data_parallel={data_parallel}", "--nproc", "2"],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"data parallel: 2 ranks (gloo, {data_parallel}), 1 groups of 2 episodes per rank" in proc.stdout
    assert proc.stdout.count("RL 1/2 iterations") == 1  # only rank 0 prints its iteration lines
    ranks = torch.load(full / "checkpoints" / "iter_000002" / "ranks.pt", weights_only=False)
    assert ranks["world_size"] == 2 and len(ranks["ranks"]) == 2
    shards = sorted(p.name for p in (full / "checkpoints" / "iter_000002").glob("optimizer_rank*.pt"))
    assert shards == (["optimizer_rank0.pt", "optimizer_rank1.pt"] if data_parallel == "fsdp" else [])
    metrics = [json.loads(ln) for ln in (full / "metrics.jsonl").read_text().splitlines()]
    it2 = [m for m in metrics if m.get("iteration") == 2][0]
    assert it2["rollout/episodes"] + it2["rollout/infra_errors"] == 4  # both ranks' episodes are logged
    assert it2["train/samples"] > 0

    resumed = tmp_path / "resumed"
    shutil.copytree(full, resumed, ignore=shutil.ignore_patterns("iter_000002", "final_model"))
    (resumed / "checkpoints" / "latest").write_text("iter_000001")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m",
                           "agentgym.trainers.cli", "train", "household-tiny", *TINY_HOUSEHOLD, f"run_dir={resumed}",
                           f"data_parallel={data_parallel}", "--resume"],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resumed from" in proc.stdout
    a, b = _final_params(full), _final_params(resumed)
    start = load_file(str(full / "tiny_model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], start[k]) for k in a)  # training did move the weights
    again = [json.loads(ln) for ln in (resumed / "metrics.jsonl").read_text().splitlines()]
    it2b = [m for m in again if m.get("iteration") == 2][-1]
    keys = [k for k in it2 if k.startswith(("rollout/", "adv/", "train/")) and "per_s" not in k]
    assert {k: it2b[k] for k in keys} == {k: it2[k] for k in keys}


@pytest.mark.parametrize("world_size", ["1", "2"])
def test_a_finished_rank_exits_with_its_code_and_its_output_flushed(world_size):
    """`exit_rank` ends a torchrun rank by os._exit (no interpreter finalization, where a finished
    gloo rank can abort) once its buffered output is written; a single process exits normally."""
    script = ("import atexit, sys\n"
              "from agentgym.trainers.distributed import exit_rank\n"
              "atexit.register(lambda: print('finalized'))\n"
              "print('done', end='')\n"
              "exit_rank(3)\n")
    proc = subprocess.run([sys.executable, "-c", script], env=dict(_env(), WORLD_SIZE=world_size),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert proc.stdout == ("done" if world_size == "2" else "donefinalized\n")
