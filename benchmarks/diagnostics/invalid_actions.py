"""Where a household policy's invalid actions happen: on the first step, after a valid step, or
after an invalid one (whose observation is only "Nothing happens.").

Plays the household-tiny held-out tasks (the preset's categories of `heldout`) with the
preset's prompt layout and sampling, and prints the invalid-action rate in each context and
the most common invalid commands. The oracle the warm start imitates never acts invalidly and
knows where objects are, so these are the states behaviour cloning never showed the model.

    python benchmarks/diagnostics/invalid_actions.py runs/household-tiny/sft_model
    python benchmarks/diagnostics/invalid_actions.py runs/household-tiny/final_model --episodes 8
"""

from __future__ import annotations

import argparse
import collections
import re
import tempfile
from pathlib import Path

KINDS = ("names something not in the room", "not admissible in this state", "not a command")
NAMED = re.compile(r"([a-z]+) (\d+)")  # "countertop 1", "mug 2": the names of things in a room


def invalid_kind(action: str, next_observation: str, in_room: set[str]) -> str:
    """Why an invalid action was invalid: no command at all, a command naming a thing that is not in
    this room (a name the model recalled instead of read), or a command not admissible here."""
    if "not a command" in next_observation:
        return "not a command"
    if any(" ".join(m) not in in_room for m in NAMED.findall(action.lower())):
        return "names something not in the room"
    return "not admissible in this state"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="HF model folder (e.g. runs/household-tiny/sft_model)")
    parser.add_argument("--episodes", type=int, default=4, help="sampled episodes per held-out task")
    parser.add_argument("--preset", default="household-tiny")
    args = parser.parse_args()

    import torch

    from agentgym.core import TaskSpec
    from agentgym.envs.household.world import get_layout
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import load_split
    from agentgym.trainers.config import load_config
    from agentgym.evaluation.evaluate import EvalRequest, run_eval
    from agentgym.trainers.task_selection import write_eval_tasks

    cfg = load_config(args.preset, [])
    from agentgym.trainers.threads import set_torch_threads

    set_torch_threads(cfg.torch_threads, print)  # a number, auto, or torch's default
    # the run's held-out set
    manifest = write_eval_tasks(cfg.eval, cfg.env, get_task_space(cfg.env.id), Path(tempfile.mkdtemp()))
    tasks = load_split(manifest)
    sampling = SamplingParams(temperature=cfg.eval.temperature, max_new_tokens=cfg.rollout.max_new_tokens, seed=0)
    request = EvalRequest(cfg.env.id, manifest, args.episodes, sampling=sampling, chat=cfg.env.chat,
                          env_kwargs=cfg.env.env_kwargs, seed=0)
    result = run_eval(request, HFPolicy(args.model))

    counts: collections.Counter = collections.Counter()
    invalid_commands: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    for traj in result.trajectories:
        previous_valid = None
        layout = get_layout(TaskSpec.from_dict(traj.task))  # every receptacle and object of the room
        in_room = set(layout.rec_names) | set(layout.obj_names)
        for i, step in enumerate(traj.steps):
            context = "first step" if i == 0 else ("after a valid step" if previous_valid else "after an invalid step")
            counts[context, step.action_valid] += 1
            if not step.action_valid:
                action = step.action or step.text
                invalid_commands[" ".join(action.split()[:1]) or "(empty)"] += 1
                following = traj.steps[i + 1].observation if i + 1 < len(traj.steps) else traj.final_observation
                kinds[invalid_kind(action, following, in_room)] += 1
            previous_valid = step.action_valid

    print(f"{args.model}: {len(tasks)} held-out tasks x {args.episodes} episodes, "
          f"success {result.success_rate:.3f}")
    print(f"{'context':24s} {'steps':>6s} {'invalid':>8s}")
    for context in ("first step", "after a valid step", "after an invalid step"):
        total = counts[context, True] + counts[context, False]
        print(f"{context:24s} {total:6d} {counts[context, False] / max(total, 1):8.3f}")
    steps = sum(counts.values())
    print("invalid actions by kind, per step:", ", ".join(f"{k} {kinds[k] / max(steps, 1):.3f}" for k in KINDS))
    print("invalid commands by first word:", ", ".join(f"{w} {n}" for w, n in invalid_commands.most_common(5)))


if __name__ == "__main__":
    main()
