"""Issue 39: every shell command of the README is either run here, verbatim, in a fresh folder (the
ones that finish in seconds), or named below with the reason it is not and the test that covers it.
A command added to the README must be put in one of the two lists."""

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
    # runs/eval/trained is a trained model's report in the README; here a random policy's (made below)
    "agentgym eval-compare runs/eval/oracle runs/eval/trained -l oracle -l trained -o runs/eval/compare":
        ("", "trained"),
}

NOT_RUN = {
    "bash scripts/setup.sh && .venv/bin/agentgym train household-tiny": "the 12-minute main job (tests/core/test_setup_quiet.py checks the set-up)",
    "bash scripts/setup.sh && .venv/bin/python -m pytest": "the whole suite itself",
    "agentgym train household-tiny": "the main job (tests/trainers: the loop on tiny settings)",
    "agentgym train household-tiny estimator.name=grpo": "the main job again",
    "agentgym train my_config.yaml policy.model=Qwen/Qwen2.5-1.5B-Instruct policy.device=cuda policy.lora={}":
        "a GPU and the user's own config (test_newcomer_start_model: an unusable device is one line)",
    "agentgym train household-tiny --resume": "resumes the main job (tests/trainers/test_resumable_runs.py)",
    "agentgym train --env mypkg/MyEnv-v0 --import mypkg":
        "a placeholder package (test_newcomer_own_env: the README's Lamp env with this command)",
    "agentgym sft household-tiny": "minutes of SFT (tests/trainers: SFT on tiny settings)",
    "agentgym view runs/household-tiny": "a server that runs until stopped (tests/viewer)",
    "agentgym eval agentgym/Household-v0 --policy hf:runs/household-tiny/final_model --split heldout_unseen -o runs/eval/trained":
        "a trained run (tests/evaluation/test_eval_cli.py: hf: end to end on a tiny model)",
    "agentgym eval agentgym/Household-v0 --policy openai:http://localhost:8000/v1:Qwen/Qwen2.5-1.5B-Instruct":
        "a model server (tests/openai)",
    "agentgym eval runs/household-tiny -o runs/eval/run": "a trained run (tests/evaluation/test_eval_run_dir.py)",
}


def test_every_readme_command_is_run_or_named_with_a_reason():
    commands = readme_commands()
    assert len(commands) == len(set(commands)), "a command listed twice"
    assert set(commands) == set(RUN) | set(NOT_RUN), (
        f"not classified: {sorted(set(commands) - set(RUN) - set(NOT_RUN))}; "
        f"no longer in the README: {sorted((set(RUN) | set(NOT_RUN)) - set(commands))}")
    assert not set(RUN) & set(NOT_RUN)


@pytest.mark.slow
def test_the_readme_commands_that_finish_in_seconds_run_as_written(tmp_path):
    exe = Path(sys.executable).parent / "agentgym"
    prefix = [str(exe)] if exe.is_file() else [sys.executable, "-m", "agentgym.cli"]
    for command, (stdin, expected) in RUN.items():
        if command.startswith("agentgym eval-compare"):  # the README's second report: here a random policy's
            made = subprocess.run([*prefix, "eval", "agentgym/Household-v0", "--policy", "random", "--split",
                                   "heldout_unseen", "--limit", "20", "-o", "runs/eval/trained"], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=300)
            assert made.returncode == 0, made.stderr[-2000:]
        args = command.split()[1:]
        done = subprocess.run([*prefix, *args], cwd=tmp_path, input=stdin, capture_output=True, text=True,
                              timeout=300)
        out = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 0, f"{command}:\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{command}:\n{done.stderr[-3000:]}"
        assert expected in out, f"{command}: {expected!r} not in\n{out[-3000:]}"


def test_the_docs_name_real_folders_not_placeholders():
    """Issue 39, item 10: TRL's example said "path/to/model"; a user copies what the docs show."""
    root = README.parent
    files = [README, *root.glob("docs/*.md"), *root.glob("envs/*/README.md"), *root.glob("agentgym/integrations/*.py")]
    assert len(files) > 5
    found = [f"{p.relative_to(root)}: {line.strip()}" for p in files
             for line in p.read_text(encoding="utf-8").splitlines() if "path/to/" in line]
    assert not found, found
