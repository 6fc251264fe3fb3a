"""Issue 19: `agentgym train --import MODULE` (and the `imports` config key) for envs that a
user's module registers, and one error naming every env feature a preset needs."""

import textwrap

USER_MODULE = textwrap.dedent('''
    from agentgym.core import TextEnv
    from agentgym.registration import register_env
    from agentgym.tasks.space import TaskSpace
    from agentgym.tasks.spec import TaskSpec

    class EchoSpace(TaskSpace):
        env_id = "user/Echo-v0"
        def read_split(self, name):
            return (TaskSpec(self.env_id, {"word": "hi"}, seed=0),) if name == "train" else ()
        def solve(self, spec):
            return [spec.params["word"]]

    class EchoEnv(TextEnv):
        task_space = EchoSpace()
        def _reset(self, task):
            return "say " + task.params["word"], self._info(False)
        def _step(self, action):
            ok = action.strip() == self.task.params["word"]
            return "ok" if ok else "no", float(ok), True, False, self._info(ok)
        def _info(self, ok):
            return {"task_id": self.task.task_id, "instruction": "echo", "anchor": "", "admissible_actions": None,
                    "action_valid": True, "success": ok, "score": float(ok)}

    register_env("user/Echo-v0", EchoEnv)
''')


def _train(tmp_path, monkeypatch, name, *args):
    from typer.testing import CliRunner

    from agentgym.cli import app

    (tmp_path / f"{name}.py").write_text(USER_MODULE.replace("user/Echo-v0", f"user/{name}-v0"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    args = [a.replace("ENV", f"user/{name}-v0").replace("MOD", name) for a in args]
    result = CliRunner().invoke(app, ["train", *args, "--run-dir", str(tmp_path / "run")])
    text = result.output + (str(result.exception) if result.exception and not isinstance(result.exception, SystemExit)
                            else "")
    return result.exit_code, text


def test_without_import_the_error_says_unknown_environment(tmp_path, monkeypatch):
    code, text = _train(tmp_path, monkeypatch, "usermod_a", "household-tiny", "env.id=ENV")
    assert code != 0 and "unknown environment" in text, text


def test_import_flag_registers_the_user_env_and_features_fail_once_with_all_of_them(tmp_path, monkeypatch):
    code, text = _train(tmp_path, monkeypatch, "usermod_b", "household-tiny", "env.id=ENV", "--import", "MOD")
    assert code != 0, text
    assert "unknown environment" not in text
    assert "fresh_tasks" in text and "categories" in text and "searching_oracle" in text, text


def test_imports_config_key_does_the_same(tmp_path, monkeypatch):
    code, text = _train(tmp_path, monkeypatch, "usermod_c", "household-tiny", "env.id=ENV", "imports=[MOD]")
    assert code != 0 and "unknown environment" not in text and "fresh_tasks" in text, text
