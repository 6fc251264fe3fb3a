"""Every config section refuses a misspelled key and an out-of-range value when the config loads:
one line naming the key (and the closest valid one), before anything is built."""

import dataclasses

import pytest

from agentgym.errors import ConfigError
from agentgym.trainers import cli, training
from agentgym.trainers import config
from agentgym.trainers.config import load_config

# (override, what the one-line error must say), a misspelling and a bad value for each section
CASES = [
    ("iteratoins=3", "unknown key iteratoins: did you mean iterations?"),
    ("iterations=-1", "iterations=-1 is out of range"),
    ("policy.devic=cpu", "did you mean policy.device?"),
    ("policy.engine=tpu", "policy.engine='tpu' is unknown"),
    ("policy.vllm.max_model_lenn=64", "did you mean policy.vllm.max_model_len?"),
    ("policy.vllm.kv_cache_gb=1", "did you mean policy.vllm.kv_cache_gib? (vLLM's own engine arguments go under "
                                  "policy.vllm.engine_args)"),
    ("policy.vllm.gpu_memory_utilization=1.5", "policy.vllm.gpu_memory_utilization=1.5 is out of range"),
    ("policy.vllm.engine_args={max_model_len: 64}", "set policy.vllm.max_model_len instead"),
    ("tiny.hiden=8", "did you mean tiny.hidden?"),
    ("sft.dagger.round=2", "did you mean sft.dagger.rounds?"),
    ("sft.matmul_dtype=fp16", "sft.matmul_dtype must be fp32 or bf16, got 'fp16'"),
    ("tiny.layers=0", "tiny.layers=0 is out of range"),
    ("env.fresh_task=3", "did you mean env.fresh_tasks?"),
    ("env.fresh_tasks=-2", "env.fresh_tasks must be >= 0"),
    ("env.chat.histroy=3", "unknown key env.chat.histroy: did you mean env.chat.history?"),
    ("env.chat.memory_style=bullets", "env.chat: memory_style must be 'list' or 'marks'"),
    ("env.chat.max_admissible=-1", "env.chat: max_admissible must be a non-negative int"),
    ("rollout.group_siz=4", "did you mean rollout.group_size?"),
    ("rollout.top_p=1.5", "rollout.top_p=1.5 is out of range"),
    ("rollout.executor=fibers", "env.executor: unknown executor 'fibers'; choose one of inprocess, process, ray, threads"),
    ("estimator.omgea=0.5", "unknown key estimator.omgea: did you mean estimator.omega?"),
    ("estimator.gamma=1.5", "gamma=1.5 is out of range"),
    ("ppo.lrr=1e-4", "did you mean ppo.lr?"),
    ("ppo.lr=-1e-4", "ppo.lr=-0.0001 is out of range"),
    ("sft.epoch=2", "did you mean sft.epochs?"),
    ("sft.slip_prob=1.5", "sft.slip_prob is a per-turn probability"),
    ("sft.epochs=0", "sft.epochs=0 trains nothing: give it epochs, add sft.dagger.rounds"),
    ("eval.episodes_per_tsk=2", "did you mean eval.episodes_per_task?"),
    ("eval.episodes_per_task=0", "eval.episodes_per_task=0 is out of range"),
    ("log.tensorbord=false", "did you mean log.tensorboard?"),
    ("log.save_trajectories_every=-1", "log.save_trajectories_every=-1 is out of range"),
    ("tasks.curriculm=sec", "did you mean tasks.curriculum?"),
    ("tasks.curriculum=secc", "did you mean sec?"),
    ("ray.num_worker=2", "did you mean ray.num_workers?"),
    ("ray.num_workers=0", "ray.num_workers must be >= 1"),
    ("ray.policy_engine=vlm", "ray.policy_engine='vlm' is unknown; choose hf or vllm"),
    ("ray.policy_engine=vllm", "ray.policy_engine=vllm sets what Ray policy replicas run: add policy.engine=ray"),
    ("data_paralel=fsdp", "unknown key data_paralel: did you mean data_parallel?"),
    ("data_parallel=zero3", "data_parallel='zero3' is unknown; choose ddp"),
    ("ppo.rollout_correction.mdoe=tis", "did you mean ppo.rollout_correction.mode?"),
    ("ppo.rollout_correction.cap=0.5", "ppo.rollout_correction.cap=0.5 is out of range"),
    ("distill.techer=x", "did you mean distill.teacher?"),
    ("distill.reward_coef=-1", "distill.reward_coef=-1 is out of range"),
]


@pytest.mark.parametrize("override,message", CASES, ids=[c[0] for c in CASES])
def test_bad_key_or_value_is_one_line_before_any_build(override, message, monkeypatch, capsys):
    def must_not_run(*args, **kwargs):
        raise AssertionError("the trainer started on a config that should have been refused")

    monkeypatch.setattr(training, "train", must_not_run)
    monkeypatch.setattr(training, "prepare_start_model", must_not_run)
    with pytest.raises(ConfigError) as err:
        cli.train_command("household-tiny", [override], run_dir=None, resume=False, nproc=1, imports=None,
                          print_config=False)
    text = str(err.value)
    assert message in text and "\n" not in text, text


def _sections(cls, prefix=""):
    """The dotted names of TrainConfig's sections: every field that is itself a dataclass."""
    yield prefix.rstrip(".")
    for f in dataclasses.fields(cls):
        sub = config._dataclass_of(f)
        if sub is not None:
            yield from _sections(sub, f"{prefix}{f.name}.")


def test_every_section_is_a_dataclass_and_is_covered():
    """A section added to TrainConfig without a case here fails this test."""
    sections = set(_sections(config.TrainConfig))
    assert {"estimator", "env.chat", "policy.vllm"} <= sections  # typed sections, not dicts
    covered = {key.rpartition(".")[0] for key in (case.split("=")[0] for case, _ in CASES)}
    assert sections <= covered, sections - covered


def test_alias_keys_and_print_config(capsys):
    cfg = load_config("household-tiny", ["rollout.executor=ray", "rollout.ray.num_workers=1", "estimator.name=ppo"])
    assert (cfg.env.executor, cfg.ray.num_workers, cfg.estimator.name) == ("ray", 1, "gae")
    with pytest.raises(ConfigError, match="same setting with two values"):
        load_config("household-tiny", ["rollout.executor=ray", "env.executor=process"])
    cli.train_command("household-tiny", ["ppo.lr=3e-4"], run_dir=None, resume=False, nproc=1, imports=None,
                      print_config=True)
    out = capsys.readouterr().out
    assert "lr: 0.0003" in out and "name: gigpo" in out and "held-out" not in out


def test_typed_sections_match_the_classes_they_configure():
    """env.chat is ChatEnv's keyword arguments and policy.vllm VLLMPolicy's: same names, same defaults."""
    import inspect

    from agentgym.chat import ChatConfig, ChatEnv
    from agentgym.policies.vllm_engine import VLLMPolicy

    chat_params = inspect.signature(ChatEnv.__init__).parameters
    assert {f.name: f.default for f in dataclasses.fields(ChatConfig)} == \
        {name: p.default for name, p in chat_params.items() if name not in ("self", "env")}
    vllm_params = inspect.signature(VLLMPolicy.__init__).parameters
    named = {f.name for f in dataclasses.fields(config.VLLMConfig)} - {"engine_args"}
    assert named <= set(vllm_params), named - set(vllm_params)


def test_vllm_replicas_without_vllm_installed_is_one_line_naming_the_extra(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else find_spec(name, *a))
    with pytest.raises(ConfigError) as err:
        load_config("household-tiny", ["policy.engine=ray", "ray.policy_engine=vllm"])
    assert "pip install 'agentgym-credit[vllm]'" in str(err.value) and "\n" not in str(err.value)
    load_config("household-tiny", ["policy.engine=ray", "ray.policy_engine=hf"])  # HF replicas need no vLLM
