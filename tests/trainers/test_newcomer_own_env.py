"""Issue 39, item 3: `agentgym train --env ID` trains any registered env, here envs defined in this
test module (outside the package): the generic preset fitted to what the task space provides, the
env's own settings unless overridden, and errors whose named fix works."""

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from agentgym.core import TextEnv
from agentgym.errors import ConfigError
from agentgym.registration import register_env
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec

GUESS_ID = "newcomer/Guess-v0"
BLIND_ID = "newcomer/Blind-v0"


class GuessTasks(TaskSpace):
    """Pick the right one of three doors; an oracle, train and heldout splits, nothing else."""

    env_id = GUESS_ID

    def read_split(self, name):
        seeds = {"train": range(6), "heldout": range(100, 103)}.get(name, ())
        return tuple(TaskSpec(self.env_id, {"door": s % 3 + 1}, seed=s) for s in seeds)

    def solve(self, spec):
        return [f"open door {spec.params['door']}"]


class BlindTasks(GuessTasks):
    """The same tasks without an oracle (so no SFT warm start is possible)."""

    env_id = BLIND_ID
    solve = TaskSpace.solve


class GuessEnv(TextEnv):
    task_space = GuessTasks()
    rules = "Actions: open door N."

    def _info(self, valid, ok=False):
        return {"task_id": self.task.task_id, "instruction": "find the exit", "anchor": str(self.tries),
                "admissible_actions": ["open door 1", "open door 2", "open door 3"], "action_valid": valid,
                "success": ok, "score": float(ok)}

    def _reset(self, task):
        self.tries = 0
        return "Three doors.", self._info(True)

    def _step(self, action):
        self.tries += 1
        ok = action == f"open door {self.task.params['door']}"
        return ("Outside." if ok else "A wall."), float(ok), ok, False, self._info(action.startswith("open door"), ok)


class BlindEnv(GuessEnv):
    task_space = BlindTasks()


register_env(GUESS_ID, GuessEnv, max_episode_steps=3)  # the env's own step limit: 3
register_env(BLIND_ID, BlindEnv, max_episode_steps=3)

TINY = ["iterations=1", "tiny.num_tasks=6", "tiny.vocab_size=300", "tiny.hidden=32", "tiny.heads=2",
        "sft.num_tasks=6", "sft.epochs=1", "eval.num_tasks=3", "rollout.tasks_per_iter=2", "rollout.group_size=2",
        "rollout.max_new_tokens=8", "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "torch_threads=1",
        "log.plot=false", "log.save_trajectories_every=0"]


def _cli(*args):
    from agentgym.cli import app

    result = CliRunner().invoke(app, list(args))
    text = result.output + (str(result.exception) if result.exception and not isinstance(result.exception, SystemExit)
                            else "")
    return result.exit_code, text


def test_train_env_trains_an_env_defined_outside_the_package(tmp_path):
    run = tmp_path / "run"
    code, text = _cli("train", "--env", GUESS_ID, *TINY, "--run-dir", str(run))
    assert code == 0, text
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["env"]["id"] == GUESS_ID and config["env"]["env_kwargs"] == {}
    assert config["sft"]["enabled"] is True  # the env has an oracle: warm start from it
    assert config["env"]["chat"]["parser"] == "raw"  # short prompts for a model trained from scratch
    summary = json.loads((run / "summary.json").read_text())
    assert summary["heldout_tasks"] == 3 and summary["iterations"] == 1
    assert (run / "tiny_model" / "config.json").is_file() and (run / "sft_model").is_dir()


def test_a_preset_for_another_env_leaves_its_env_settings_out(tmp_path):
    code, text = _cli("train", "household-tiny", "--env", GUESS_ID, "--print-config")
    assert code == 0, text
    config = yaml.safe_load(text[text.index("name:"):])
    # household's max_episode_steps=12, categories, requires and searching expert are household's own
    assert config["env"]["env_kwargs"] == {} and config["env"]["categories"] == []
    assert config["env"]["requires"] == [] and config["env"]["fresh_tasks"] == 0
    assert config["sft"]["expert"] == "oracle" and config["sft"]["dawdle_prob"] == 0
    assert "left out household-tiny's settings for agentgym/Household-v0" in text and "env.env_kwargs" in text
    # an override is the user's: it stays
    code, text = _cli("train", "household-tiny", "--env", GUESS_ID, "env.env_kwargs={max_episode_steps: 2}",
                      "--print-config")
    assert code == 0 and yaml.safe_load(text[text.index("name:"):])["env"]["env_kwargs"] == {"max_episode_steps": 2}


def test_without_an_oracle_there_is_no_warm_start_and_the_log_says_so():
    code, text = _cli("train", "--env", BLIND_ID, "--print-config")
    assert code == 0, text
    assert yaml.safe_load(text[text.index("name:"):])["sft"]["enabled"] is False
    assert "no SFT warm start" in text
    code, text = _cli("train", "--env", BLIND_ID, "sft.enabled=true", "--print-config")  # asked for: refused
    assert code != 0 and "oracle" in text and "sft.enabled=false" in text, text


def test_the_fix_a_feature_error_names_works():
    """The household preset on another env: one error, and its overrides give a config that passes."""
    from agentgym.registration import get_task_space
    from agentgym.trainers.config import load_config
    from agentgym.trainers.env_requirements import check_env_features

    space = get_task_space(GUESS_ID)
    cfg = load_config("household-tiny", [f"env.id={GUESS_ID}"])
    with pytest.raises(ConfigError) as err:
        check_env_features(cfg.env, cfg.sft, space)
    message = str(err.value)
    assert f"agentgym train --env {GUESS_ID}" in message
    fixes = re.search(r"add these overrides: (.*?), or train", message).group(1).split()
    assert "env.requires=[]" in fixes and "sft.dawdle_prob=0" in fixes
    fixed = load_config("household-tiny", [f"env.id={GUESS_ID}", *fixes])
    check_env_features(fixed.env, fixed.sft, space)


def test_an_env_without_heldout_tasks_names_the_fix():
    from agentgym.trainers.env_requirements import fit_to_env
    from agentgym.trainers.config import load_config

    class TrainOnly(GuessTasks):
        def read_split(self, name):
            return super().read_split(name) if name == "train" else ()

    cfg = load_config("generic", [f"env.id={GUESS_ID}"])
    with pytest.raises(ConfigError, match="eval.split=train"):
        fit_to_env(cfg, TrainOnly())
    fit_to_env(load_config("generic", [f"env.id={GUESS_ID}", "eval.split=train"]), TrainOnly())


def test_a_given_model_keeps_the_envs_own_chat_format(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    code, text = _cli("train", "--env", GUESS_ID, f"policy.model={tmp_path / 'model'}", "--print-config")
    assert code == 0, text
    config = yaml.safe_load(text[text.index("name:"):])
    assert config["env"]["chat"]["parser"] is None and config["env"]["chat"]["system_prompt"] is None


def _user_shell_env() -> dict:
    """A user's shell: no PYTHONPATH, nothing this test process put on sys.path."""
    import os

    keep = ("PATH", "HOME", "LANG", "TMPDIR", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, "OMP_NUM_THREADS": "1"}


def test_the_readme_lamp_env_trains_with_the_readme_command(tmp_path):
    """Issue 53, item 1: README's Lamp block saved as lamp.py, then `agentgym train --env agentgym/Lamp-v0
    --import lamp` run as a user runs it: the console script, in the folder holding lamp.py, no
    PYTHONPATH. The module is found there as `python -m` finds one, and its prints land in the log."""
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "`agentgym train --env agentgym/Lamp-v0 --import lamp`" in readme
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "class LampTasks" in b)
    (tmp_path / "lamp.py").write_text(block)
    agentgym = str(Path(sys.executable).parent / "agentgym")
    listed = subprocess.run([agentgym, "envs", "--import", "lamp"], cwd=tmp_path, env=_user_shell_env(),
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "agentgym/Lamp-v0" in listed.stdout, listed.stdout + listed.stderr
    done = subprocess.run([agentgym, "train", "--env", "agentgym/Lamp-v0", "--import", "lamp", *TINY,
                           "sft.num_tasks=20", "--run-dir", "run"], cwd=tmp_path, env=_user_shell_env(),
                          capture_output=True, text=True, timeout=600)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    assert "A dark room with" in done.stdout  # lamp.py's own print, in the training log
    assert "fresh tasks from its generator" not in text  # 20 train tasks are enough for sft.num_tasks=20
    assert "short prompts for a tiny model" in text and (tmp_path / "run" / "summary.json").is_file()


def test_a_presets_step_limit_on_another_env_is_never_silent():
    code, text = _cli("train", "household-tiny", f"env.id={GUESS_ID}", "--print-config")
    assert code == 0, text
    assert "max_episode_steps" in text and f"--env {GUESS_ID}` leaves them out" in " ".join(text.split())


def test_train_env_with_a_given_model_trains_that_model(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    code, text = _cli("train", "--env", GUESS_ID, f"policy.model={tiny_model_dir}", *TINY, "--run-dir", str(run))
    assert code == 0, text
    assert not (run / "tiny_model").exists() and (run / "final_model" / "config.json").is_file()
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["policy"]["model"] == str(tiny_model_dir) and config["env"]["chat"]["parser"] is None
