"""Issue 39, item 5: Ctrl-C during `agentgym train` exits with status 130 and one line naming the
last checkpoint and the command that resumes the run (a real SIGINT to a real training process)."""

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

USER_MODULE = textwrap.dedent('''
    from agentgym import TaskSpace, TaskSpec, TextEnv, register_env

    class DoorTasks(TaskSpace):
        env_id = "newcomer/Doors-v0"
        def read_split(self, name):
            seeds = {"train": range(6), "heldout": range(100, 103)}.get(name, ())
            return tuple(TaskSpec(self.env_id, {"door": s % 3 + 1}, seed=s) for s in seeds)
        def solve(self, spec):
            return [f"open door {spec.params['door']}"]

    class DoorEnv(TextEnv):
        task_space = DoorTasks()
        def _info(self, ok=False):
            return {"task_id": self.task.task_id, "instruction": "find the exit", "anchor": "",
                    "admissible_actions": ["open door 1", "open door 2", "open door 3"], "action_valid": True,
                    "success": ok, "score": float(ok)}
        def _reset(self, task):
            return "Three doors.", self._info()
        def _step(self, action):
            ok = action == f"open door {self.task.params['door']}"
            return "Outside." if ok else "A wall.", float(ok), ok, False, self._info(ok)

    register_env("newcomer/Doors-v0", DoorEnv, max_episode_steps=3)
''')


def _interrupt_training(tmp_path: Path, args: list[str], ready: Path, what: str, settle_s: float = 0.0):
    """`agentgym <args>` with the user's env module importable, Ctrl-C once `ready` exists (and
    `settle_s` more): (exit status, output)."""
    (tmp_path / "doors_env.py").write_text(USER_MODULE)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "agentgym.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not ready.is_file():
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, f"no {what} after 240 s"
            time.sleep(0.2)
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out


def test_ctrl_c_exits_130_naming_the_checkpoint_and_the_resume_command(tmp_path):
    run = tmp_path / "run"
    args = ["train", "--env", "newcomer/Doors-v0", "--import", "doors_env", "iterations=500", "checkpoint_every=1",
            "tiny.num_tasks=6", "tiny.vocab_size=300", "tiny.hidden=32", "tiny.heads=2", "sft.enabled=false",
            "eval.num_tasks=3", "rollout.tasks_per_iter=2", "rollout.group_size=2", "rollout.max_new_tokens=4",
            "torch_threads=1", "log.save_trajectories_every=0", "--run-dir", str(run)]
    returncode, out = _interrupt_training(tmp_path, args, run / "checkpoints" / "latest", "checkpoint")
    assert returncode == 130, out
    line = [x for x in out.splitlines() if x.startswith("interrupted")]
    assert len(line) == 1 and "Traceback" not in out, out
    checkpoint = (run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip())
    assert f"last checkpoint {checkpoint}" in line[0]
    command = shlex.split(line[0].split("continue with: ", 1)[1])
    assert command[:2] == ["agentgym", "train"] and command[-1] == "--resume"
    assert sorted(command[2:-1]) == sorted(args[1:])  # the same run (same arguments), resumed
    assert Path(checkpoint).is_dir()


def test_ctrl_c_before_the_first_checkpoint_says_the_run_starts_again(tmp_path):
    """Interrupted while SFT or the first iterations run (no checkpoint yet): 130, one line, no resume
    command that would fail."""
    run = tmp_path / "run"
    args = ["train", "--env", "newcomer/Doors-v0", "--import", "doors_env", "iterations=500", "checkpoint_every=0",
            "tiny.num_tasks=6", "tiny.vocab_size=300", "tiny.hidden=32", "tiny.heads=2", "sft.num_tasks=6",
            "sft.epochs=1000", "eval.num_tasks=3", "rollout.tasks_per_iter=2", "rollout.group_size=2",
            "torch_threads=1", "log.save_trajectories_every=0", "--run-dir", str(run)]
    # SFT (1000 epochs) is under way once the tiny model exists
    returncode, out = _interrupt_training(tmp_path, args, run / "tiny_model" / "config.json", "tiny model",
                                          settle_s=1.0)
    assert returncode == 130, out
    line = [x for x in out.splitlines() if x.startswith("interrupted")]
    assert len(line) == 1 and "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "before the first checkpoint" in line[0] and "--resume" not in line[0], line
    assert shlex.split(line[0].split("`")[1])[:2] == ["agentgym", "train"]
