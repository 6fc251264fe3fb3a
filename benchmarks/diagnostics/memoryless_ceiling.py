"""How well can an agent that sees what household-tiny's model sees do at all?

The preset's prompt holds the task, the current observation and the admissible actions, nothing
of the past (`env.chat.history: 0`). This plays the preset's held-out tasks with a scripted
policy restricted to the same view: take the goal object when it is listed, put it in the
destination or use the lamp when that is listed, otherwise go to a receptacle from the list.
With no memory the only way to search is at random, so three variants:

* random search, never an invalid action: the ceiling of the model's prompt layout;
* the same with a fraction of turns wasted on an invalid action, the rate the warm start shows;
* deterministic search (always the first receptacle listed): what a memoryless policy whose
  choice has collapsed to one answer gets, e.g. after RL sharpened it.

    python benchmarks/diagnostics/memoryless_ceiling.py
    python benchmarks/diagnostics/memoryless_ceiling.py --episodes 50 --invalid-rate 0.38
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path


def choose(admissible: list[str], goal: str, target: str, look: bool, rng: random.Random | None) -> str:
    """The scripted action for one view. `goal` and `target` are the object and destination (or
    lamp) types the instruction names; `rng=None` searches deterministically."""
    holding = any(a.split()[0] in ("move", "put") and a.split()[1] == goal for a in admissible)
    for a in admissible:
        words = a.split()
        if not holding and words[0] == "take" and words[1] == goal:
            return a
        if holding and words[0] in ("move", "put") and words[1] == goal and words[-2] == target:
            return a
        if holding and look and words[0] == "use":
            return a
        if words[0] == "open":
            return a
    moves = [a for a in admissible if a.startswith("go to ")]
    if holding and not look:
        moves = [a for a in moves if a.split()[2] == target] or moves
    return moves[0] if rng is None else rng.choice(moves)


def play(env_id: str, env_kwargs: dict, tasks: list, episodes: int, invalid_rate: float,
         deterministic: bool, seed: int) -> float:
    import gymnasium as gym

    from agentgym.envs.household.world import get_layout

    rng = random.Random(seed)
    env = gym.make(env_id, **env_kwargs)
    wins = total = 0
    for spec in tasks:
        layout = get_layout(spec)
        look = layout.task_type == "look_at_obj_in_light"
        for _ in range(episodes):
            _, info = env.reset(options={"task": spec})
            done = False
            while not done:
                if rng.random() < invalid_rate:
                    action = "go to nowhere 1"  # a name the room does not have: "Nothing happens."
                else:
                    action = choose(info["admissible_actions"], layout.goal_type, layout.target, look,
                                    None if deterministic else rng)
                _, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            wins += bool(info["success"])
            total += 1
    return wins / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="episodes per held-out task")
    parser.add_argument("--invalid-rate", type=float, default=0.38,
                        help="fraction of wasted turns (the warm start's held-out invalid-action rate)")
    parser.add_argument("--preset", default="household-tiny")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import load_split
    from agentgym.trainers.config import load_config
    from agentgym.trainers.task_selection import write_eval_tasks

    cfg = load_config(args.preset, [])
    tasks = load_split(write_eval_tasks(cfg.eval, cfg.env, get_task_space(cfg.env.id), Path(tempfile.mkdtemp())))
    rows = [
        ("random search, no invalid action", 0.0, False),
        (f"random search, {args.invalid_rate:.0%} of turns invalid", args.invalid_rate, False),
        ("deterministic search, no invalid action", 0.0, True),
    ]
    print(f"{args.preset}: {len(tasks)} held-out tasks x {args.episodes} episodes, "
          f"max {cfg.env.env_kwargs.get('max_episode_steps')} steps, view = task + current observation + admissible")
    for name, rate, deterministic in rows:
        success = play(cfg.env.id, cfg.env.env_kwargs, tasks, args.episodes, rate, deterministic, args.seed)
        print(f"  {name:45s} success {success:.3f}")


if __name__ == "__main__":
    main()
