"""Issue 39: every shell command of the README is either run here, verbatim, in a fresh folder (the
ones that finish in seconds), or named below with the reason it is not and the test that covers it.
A command added to the README must be put in one of the two lists."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> list[str]:
    """Each command line of the README's ```bash blocks, comments and trailing spaces removed."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


# Run verbatim in this order, in one folder (eval-compare reads the reports eval wrote), with stdin
# where the command reads it, and what its output must say.
RUN = {
    "agentgym envs": ("", "agentgym/Household-v0"),
    "agentgym play agentgym/Household-v0": ("look\nquit\n", "You are in the middle of a room"),
    "agentgym rollout agentgym/Household-v0 --policy oracle --tasks heldout --episodes 2 --out traj.jsonl":
        ("", "trajectories written to traj.jsonl"),
    "agentgym train household-tiny --print-config": ("", "household-tiny"),
    "agentgym eval agentgym/Household-v0 --policy oracle --split heldout --episodes 4 --out runs/eval/oracle":
        ("", "runs/eval/oracle/report.json"),
}

NOT_RUN = {
    "bash scripts/setup.sh && .venv/bin/agentgym train household-tiny torch_threads=1":
        "the main job (tests/core/test_setup_quiet.py checks the set-up; its figures: test_quoted_figures.py)",
    "bash scripts/setup.sh && .venv/bin/python -m pytest -n 2 --dist loadfile": "the whole suite itself",
    "agentgym train household-tiny": "the main job (tests/trainers: the loop on tiny settings)",
    "agentgym train household-tiny estimator.name=grpo --run-dir runs/household-grpo":
        "the main job again (a second run in a used run dir: test_config_and_resume.py)",
    "agentgym train my_config.yaml policy.model=Qwen/Qwen2.5-1.5B-Instruct policy.device=cuda policy.lora={}":
        "a GPU and the user's own config (test_newcomer_start_model: an unusable device is one line)",
    "agentgym train household-tiny --resume": "resumes the main job (tests/trainers/test_resumable_runs.py)",
    "agentgym train --env mypkg/MyEnv-v0 --import mypkg":
        "a placeholder package (test_newcomer_own_env: the README's Lamp env with this command)",
    "agentgym sft household-tiny": "minutes of SFT (tests/trainers: SFT on tiny settings)",
    "agentgym view runs/household-tiny": "a server that runs until stopped (tests/viewer)",
    "agentgym gateway --train household-tiny":
        "a server that trains on the episodes a user's program reports (tests/gateway/test_gateway_training.py)",
    "python examples/gateway_agent.py":
        "an agent program for the gateway above (tests/gateway/test_gateway_example.py runs it against a real one)",
    "agentgym eval agentgym/Household-v0 --policy hf:smollm2-135m-instruct --preset household-smol --limit 5":
        "minutes of a real model on CPU (tests/models/test_round5_models.py: eval by catalog name with --preset)",
    "agentgym eval agentgym/Household-v0 --policy hf:runs/household-tiny/final_model --split heldout_unseen -o runs/eval/trained":
        "a trained run (tests/evaluation/test_eval_cli.py: hf: end to end on a tiny model)",
    "agentgym eval agentgym/Household-v0 --policy openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct":
        "a model server (tests/openai)",
}

# Run verbatim against a tiny run trained into runs/household-tiny (the README's Lamp env with tiny
# counts: the main job takes 12 minutes): their figures must be the run's summary.json ones, and
# eval-compare must find the two reports measured alike.
ON_A_TINY_RUN = [
    "agentgym eval runs/household-tiny -o runs/eval/final",
    "agentgym eval --from-run runs/household-tiny --policy hf:runs/household-tiny/sft_model -o runs/eval/sft",
    "agentgym eval-compare runs/eval/sft runs/eval/final -l warm-start -l final -o runs/eval/compare",
]


def test_every_readme_command_is_run_or_named_with_a_reason():
    commands = readme_commands()
    assert len(commands) == len(set(commands)), "a command listed twice"
    known = set(RUN) | set(NOT_RUN) | set(ON_A_TINY_RUN)
    assert set(commands) == known, (f"not classified: {sorted(set(commands) - known)}; "
                                    f"no longer in the README: {sorted(known - set(commands))}")
    assert len(known) == len(RUN) + len(NOT_RUN) + len(ON_A_TINY_RUN)


@pytest.mark.slow
def test_the_readme_commands_that_finish_in_seconds_run_as_written(tmp_path):
    exe = Path(sys.executable).parent / "agentgym"
    prefix = [str(exe)] if exe.is_file() else [sys.executable, "-m", "agentgym.cli"]
    for command, (stdin, expected) in RUN.items():
        args = command.split()[1:]
        done = subprocess.run([*prefix, *args], cwd=tmp_path, input=stdin, capture_output=True, text=True,
                              timeout=300)
        out = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 0, f"{command}:\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{command}:\n{done.stderr[-3000:]}"
        assert expected in out, f"{command}: {expected!r} not in\n{out[-3000:]}"


def _agentgym() -> list[str]:
    exe = Path(sys.executable).parent / "agentgym"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "agentgym.cli"]


@pytest.mark.slow
def test_the_readme_eval_commands_give_the_runs_own_figures(tmp_path):
    pytest.importorskip("transformers")
    readme = README.read_text(encoding="utf-8")
    lamp = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "class LampTasks" in b)
    (tmp_path / "lamp.py").write_text(lamp)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OMP_NUM_THREADS": "1"}  # lamp.py: found in cwd
    tiny = ["iterations=1", "tiny.num_tasks=6", "tiny.vocab_size=300", "tiny.hidden=32", "tiny.heads=2",
            "sft.num_tasks=20", "sft.epochs=2", "eval.num_tasks=5", "rollout.tasks_per_iter=2", "rollout.group_size=2",
            "rollout.max_new_tokens=8", "ppo.minibatch_size=8", "ppo.micro_batch_size=8", "torch_threads=1",
            "log.plot=false", "log.save_trajectories_every=0", "checkpoint_every=0"]
    trained = subprocess.run([*_agentgym(), "train", "--env", "agentgym/Lamp-v0", "--import", "lamp", *tiny,
                              "--run-dir", "runs/household-tiny"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    summary = json.loads((tmp_path / "runs" / "household-tiny" / "summary.json").read_text())
    outputs = []
    for command in ON_A_TINY_RUN:
        done = subprocess.run([*_agentgym(), *command.split()[1:]], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}:\n{done.stderr[-3000:]}"
        outputs.append(" ".join((done.stdout + done.stderr).split()))

    def success(name):
        return json.loads((tmp_path / "runs" / "eval" / name / "report.json").read_text())["overall"]["success_rate"]

    assert success("final")["value"] == summary["heldout_success_after"]
    assert success("sft")["value"] == summary["heldout_success_before"]
    assert "warning" not in outputs[2] and "not comparable" not in outputs[2], outputs[2]


def test_the_docs_name_real_folders_not_placeholders():
    """Issue 39, item 10: TRL's example said "path/to/model"; a user copies what the docs show."""
    root = README.parent
    files = [README, *root.glob("docs/*.md"), *root.glob("envs/*/README.md"), *root.glob("agentgym/integrations/*.py")]
    assert len(files) > 5
    found = [f"{p.relative_to(root)}: {line.strip()}" for p in files
             for line in p.read_text(encoding="utf-8").splitlines() if "path/to/" in line]
    assert not found, found
