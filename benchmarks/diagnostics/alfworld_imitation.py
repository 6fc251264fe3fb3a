"""Where a clone of ALFWorld's searching demonstrator leaves it: the demonstrator's decision at
every state a policy reached, read from the policy's own trajectories (no game is played).

The searching demonstrator (envs/alfworld/searching.py) decides from what the prompt shows: the
observation, the admissible list, the commands already taken and where the task's things were
seen. So its state can be rebuilt from any episode's history, and at each step of a policy's
episode we can ask what it would have done there. This gives, per kind of decision (deliver the
held object, take one here, go where one was seen, open here, search on), how often the policy
agrees with its teacher, and at which step an episode first leaves it.

    python benchmarks/diagnostics/alfworld_imitation.py RUN/evals/iter00000/trajectories.jsonl
    python benchmarks/diagnostics/alfworld_imitation.py A.jsonl B.jsonl --out docs/alfworld_imitation.json

(`agentgym eval ... --out DIR` writes DIR/trajectories.jsonl; a training run writes one per
evaluation under RUN/evals/.) Episodes must come from the marks layout with memory_seen, the
prompt the demonstrator reads (the alfworld-tiny preset's).

With `--policy hf:MODEL`, the model also answers every prompt of the given episodes, greedily
within the admissible list: on the demonstrator's own episodes (`agentgym eval ... --policy
searching`) that is how well the clone learned its teacher where the teacher goes, apart from
where its own mistakes take it.

    python benchmarks/diagnostics/alfworld_imitation.py DEMO/trajectories.jsonl --policy hf:RUN/sft_model
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from agentgym.evaluation.stats import wilson_interval

_LIST = re.compile(r"^Admissible actions: (.*)$", re.M)


def admissible_of(prompt: str) -> list[str]:
    """The admissible list a prompt showed, without its "(tried)" marks."""
    match = _LIST.search(prompt)
    if match is None:
        raise ValueError("the prompt lists no admissible actions: evaluate with the alfworld-tiny preset's chat layout")
    return [c.removesuffix(" (tried)").strip() for c in match.group(1).split(", ")]


def decision_kind(demo, label: str, admissible: list[str]) -> str:
    """Which of the demonstrator's rules gave `label`, its command here (its docstring's numbering)."""
    if demo._held(admissible) is not None:
        return "deliver"
    if label.startswith("take "):
        return "take"
    if label.startswith("open "):
        return "open"
    if label.startswith("go to ") and label not in [c for c in admissible if c.startswith("go to ")
                                                    and c not in demo.tried] + ["go to " + demo.here]:
        return "go back"  # to a place already visited, where a goal thing was seen
    return "search" if label.startswith("go to ") else "other"


def replay(trajectory: dict, traj_data: dict, answer=None) -> list[tuple[str, str, str]]:
    """(kind, demonstrator's command, policy's command) at each step of one episode; with
    `answer(messages_per_step, admissible_per_step) -> commands`, the command is that policy's
    answer to the step's prompt instead of the one the episode took."""
    from agentgym.envs.alfworld.searching import SearchingDemonstrator, first_observation

    instruction = trajectory.get("instruction") or ""
    if not instruction:
        _, instruction = first_observation(trajectory["steps"][0]["observation"])
    demo = SearchingDemonstrator(instruction, traj_data.get("task_type", ""), traj_data.get("pddl_params", {}))
    steps = trajectory["steps"]
    lists = [admissible_of(step["messages"][-1]["content"]) for step in steps]
    answers = answer([step["messages"] for step in steps], lists) if answer else [step["action"] for step in steps]
    out = []
    for i, (step, admissible) in enumerate(zip(steps, lists)):
        label = demo.act(step["observation"], admissible)
        out.append((decision_kind(demo, label, admissible), label, answers[i]))
        if step.get("action_valid", True):
            after = steps[i + 1]["observation"] if i + 1 < len(steps) else trajectory.get("final_observation", "")
            demo.observe(step["action"], after or "")
    return out


def greedy_answers(policy_spec: str):
    """answer() of replay for an hf: model: its greedy reply within each step's admissible list."""
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy

    if not policy_spec.startswith("hf:"):
        raise SystemExit(f"--policy takes hf:MODEL_FOLDER, got {policy_spec!r}")
    policy = HFPolicy(policy_spec[3:], device="cpu")
    sampling = SamplingParams(temperature=0.0, max_new_tokens=32)

    def answer(messages: list, lists: list[list[str]]) -> list[str]:
        prompts = [policy.encode_prompt(m) for m in messages]
        replies = [[policy.encode_response(c) for c in commands] for commands in lists]
        done = policy.generate_ids(prompts, sampling, allowed_replies=replies)
        return [c.text.strip() for c in done]

    return answer


def summarize(path: Path, space, answer=None) -> dict:
    from agentgym.tasks.spec import TaskSpec

    agree, total = Counter(), Counter()
    first_leave = Counter()
    episodes = successes = on_track = 0
    for line in path.open():
        trajectory = json.loads(line)
        spec = TaskSpec.from_dict(trajectory["task"])
        decisions = replay(trajectory, space.traj_data(spec), answer)
        episodes += 1
        successes += bool(trajectory["success"])
        left = next((i for i, (_, label, action) in enumerate(decisions) if label != action), None)
        on_track += left is None
        first_leave[left if left is not None else "never"] += 1
        for kind, label, action in decisions:
            total[kind] += 1
            agree[kind] += label == action
    rows = {}
    for kind in [*sorted(total), "all"]:
        n = sum(total.values()) if kind == "all" else total[kind]
        k = sum(agree.values()) if kind == "all" else agree[kind]
        est = wilson_interval(k, n)
        rows[kind] = {"steps": n, "agree": k, "value": est.value, "lo": est.low, "hi": est.high}
    return {"trajectories": str(path), "episodes": episodes, "success": successes / max(episodes, 1),
            "episodes_never_leaving": on_track, "agreement": rows,
            "first_step_leaving": {str(k): v for k, v in sorted(first_leave.items(), key=lambda kv: str(kv[0]))}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trajectories", nargs="+", type=Path, help="trajectories.jsonl of ALFWorld-v0 episodes")
    parser.add_argument("--policy", help="hf:MODEL: the model answers each step's prompt (greedy, admissible-only) "
                        "in place of the episode's own command")
    parser.add_argument("--out", type=Path, help="write the summaries as JSON here")
    args = parser.parse_args()

    from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace

    space = ALFWorldTaskSpace()
    answer = greedy_answers(args.policy) if args.policy else None
    results = []
    for path in args.trajectories:
        summary = summarize(path, space, answer)
        summary["policy"] = args.policy or "the episodes' own commands"
        results.append(summary)
        print(f"{path}: {summary['episodes']} episodes, success {summary['success']:.3f}, "
              f"{summary['episodes_never_leaving']} never leave the demonstrator")
        for kind, row in summary["agreement"].items():
            print(f"  {kind:9s} {row['agree']:5d}/{row['steps']:<5d} agree {row['value']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
