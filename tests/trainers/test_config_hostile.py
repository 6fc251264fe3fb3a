"""Issue 38: hostile configs. YAML aliases, depth, size and encoding are refused in one line;
every field is checked by type and range when the config loads (so `--print-config` refuses
too); env kwargs against the env's signature, categories against its task space, a tasks file
against the env. A property test feeds random and hostile values to every field: one line or a
valid accepted value, never a traceback."""

from __future__ import annotations

import dataclasses
import sys
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.errors import AgentGymError, ConfigError
from agentgym.trainers.config import TrainConfig, _dataclass_of, check_types, load_config, save_config

BASE = ["tiny.build=true"]


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert isinstance(exc, AgentGymError) and text and "\n" not in text, repr(text)
    return text


def _load_file(tmp_path, content: bytes | str):
    path = tmp_path / "cfg.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_config(path, BASE)
    assert time.perf_counter() - start < 5, "the refusal took too long (expansion?)"
    return _one_line(err.value)


def _alias_bomb(levels: int = 9) -> str:
    lines = ["env:", "  env_kwargs:", '    a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, levels + 1):
        lines.append(f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bombs_and_recursive_aliases_are_refused(tmp_path):
    assert len(_alias_bomb()) < 1200  # ~1 KB expanding to 10^10 leaves
    assert "alias" in _load_file(tmp_path, _alias_bomb())
    bomb = _alias_bomb().replace("env:\n  env_kwargs:", "tasks:\n  curriculum_opts:")
    assert "alias" in _load_file(tmp_path, bomb)
    assert "alias" in _load_file(tmp_path, "env:\n  env_kwargs:\n    loop: &l [*l]\n")
    with pytest.raises(ConfigError):
        load_config(None, BASE + ["env.env_kwargs={a: &x [1], b: *x}"])


def test_deep_huge_and_non_utf8_files_are_one_line(tmp_path):
    assert "deeper" in _load_file(tmp_path, "env:\n  env_kwargs:\n    x: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert "UTF-8" in _load_file(tmp_path, b"name: \xff\xfe run\n")
    assert "byte limit" in _load_file(tmp_path, "name: x\n" + "#" * (2 << 20) + "\n")
    assert "cannot read" in _load_file(tmp_path, "seed: " + "9" * 5000 + "\n")


def test_a_fifo_or_folder_named_as_the_config_is_one_line_not_a_hang(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "folder.yaml").mkdir()
    for name, kind in (("pipe.yaml", "a FIFO"), ("folder.yaml", "a folder")):
        with pytest.raises(ConfigError) as err:
            load_config(tmp_path / name, BASE)
        assert kind in _one_line(err.value)


ISSUE_CASES = ["policy.vllm.engine_args=abc", "seed=" + "9" * 5000, "ppo.lr=inf", "ppo.epochs=1.5", "seed=-1",
               "env.env_kwargs.bogus=1", "tiny.heads=3", "policy.device=bogus", "policy.lora=5",
               "policy.lora={r: -1}", "env.max_tasks=-1", "log.wandb=maybe", "policy.max_prompt_tokens=-1",
               "rollout.episode_time_limit_s=nan", "ray.step_timeout_s=nan", "ppo.is_cap=nan", "ppo.value_coef=nan",
               "env.categories=[bogus]", "env.categories=[null]", "name=", "name=../..", "policy.lora={bogus_key: 1}"]


@pytest.mark.parametrize("override", ISSUE_CASES, ids=[c[:40] for c in ISSUE_CASES])
def test_each_bad_value_of_the_issue_is_one_line_at_load(override):
    with pytest.raises(ConfigError) as err:
        load_config(None, BASE + [override])
    _one_line(err.value)


def test_print_config_refuses_too(capsys):
    from agentgym.trainers import cli

    with pytest.raises(ConfigError):
        cli.train_command("household-tiny", ["ppo.lr=inf"], run_dir=None, resume=False, nproc=1, imports=None,
                          print_config=True)
    assert "ppo" not in capsys.readouterr().out


def test_print_config_needs_no_torch(capsys, monkeypatch):
    """The resolved config prints before the train extra is installed (torch is imported after it)."""
    from agentgym.trainers import cli

    monkeypatch.setitem(sys.modules, "torch", None)  # as if not installed
    cli.train_command("household-tiny", ["iterations=3"], run_dir=None, resume=False, nproc=1, imports=None,
                      print_config=True)
    assert "iterations: 3" in capsys.readouterr().out


def test_a_tasks_file_of_another_env_or_with_extra_params_is_one_line(tmp_path):
    import agentgym
    from agentgym.tasks.spec import TaskSpec
    from agentgym.tasks.splits import save_split

    task = agentgym.get_task_space("agentgym/Household-v0").split("train")[0]
    save_split(tmp_path / "extra.jsonl", [TaskSpec(task.env_id, {**task.params, "bogus": 1}, task.seed)])
    save_split(tmp_path / "other.jsonl", [TaskSpec("agentgym/SWE-v0", {"repo": "datekit"}, 0)])
    for name, words in (("extra.jsonl", "bogus"), ("other.jsonl", "SWE-v0")):
        with pytest.raises(ConfigError) as err:
            load_config(None, BASE + [f"env.tasks_file={tmp_path / name}"])
        assert words in _one_line(err.value)


def test_valid_values_are_still_accepted():
    cfg = load_config(None, BASE + ["seed=7", "ppo.lr=3e-4", "policy.lora={r: 8, lora_alpha: 16}", "tiny.heads=8",
                                    "env.categories=['*/easy']", "env.env_kwargs.max_episode_steps=30",
                                    "policy.device=cpu", "ppo.is_cap=2.0", "log.wandb=false"])
    assert cfg.policy.lora == {"r": 8, "lora_alpha": 16} and cfg.ppo.lr == 3e-4


# --- the property: every field, random and hostile values -------------------------------------
def _fields(cls=TrainConfig, prefix=""):
    out = []
    for f in dataclasses.fields(cls):
        sub = _dataclass_of(f)
        out += _fields(sub, f"{prefix}{f.name}.") if sub is not None else [f"{prefix}{f.name}"]
    return out


FIELDS = _fields()
HOSTILE = ["nan", ".nan", ".inf", "-.inf", "1e400", "-1", "0", "1.5", "-0.0", "9" * 5000, "1" * 30, "true", "maybe",
           "null", "~", "", "[]", "{}", "[1, [2, [3]]]", "{a: 1}", "{r: -1}", "&a [*a]", "*x", "[" * 200 + "]" * 200,
           "!!python/object/apply:os.system ['true']", "!!binary aGk=", "2001-12-14", "0x1F", "0o17", "'\x00'",
           "{1: 2}", "[.nan]", "{a: .inf}", "../../etc", "cuda:99", "{bogus: 1}", "[bogus]", "*/easy", "a=b=c"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
rendered = st.one_of(st.sampled_from(HOSTILE), values.map(lambda v: yaml.safe_dump(v, default_flow_style=True)
                                                           .strip().replace("\n...", "").replace("\n", " ")),
                     st.text(max_size=40))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FIELDS), raw=rendered)
def test_any_value_of_any_field_is_one_line_or_accepted(tmp_path_factory, field, raw):
    try:
        cfg = load_config(None, BASE + [f"{field}={raw}"])
    except AgentGymError as exc:
        _one_line(exc)
        return
    check_types(cfg)  # what was accepted has its field's type, finite, plain data
    out = tmp_path_factory.mktemp("cfg") / "config.yaml"
    save_config(cfg, out)
    assert load_config(out).to_dict() == cfg.to_dict()  # and survives the run dir's round trip


def _as_file(field: str, raw: str) -> str:
    parts = field.split(".")
    return "".join("  " * i + p + ":\n" for i, p in enumerate(parts[:-1])) + "  " * (len(parts) - 1) + \
        f"{parts[-1]}: {raw}\n"


def test_every_field_with_every_hostile_value(tmp_path):
    """The property test samples fields; this sweep guarantees each of them meets every hostile
    value, as an override and in a config file: one line or an accepted value that type-checks."""
    path = tmp_path / "cfg.yaml"
    failures = []
    for field in FIELDS:
        for raw in HOSTILE:
            for how in ("override", "file"):
                try:
                    if how == "override":
                        cfg = load_config(None, BASE + [f"{field}={raw}"])
                    else:
                        path.write_text(_as_file(field, raw))
                        cfg = load_config(path, BASE)
                    check_types(cfg)
                except AgentGymError as exc:
                    if not str(exc) or "\n" in str(exc):
                        failures.append((how, field, raw[:20], "not one line"))
                except BaseException as exc:  # noqa: BLE001 - the point: a traceback is a failure
                    failures.append((how, field, raw[:20], f"{type(exc).__name__}: {str(exc)[:80]}"))
    assert len(FIELDS) > 100 and not failures, failures[:10]
