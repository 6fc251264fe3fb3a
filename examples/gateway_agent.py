"""An agent program trained through the gateway, as it would be written against any OpenAI server.

    agentgym gateway --train household-tiny      # one terminal: trains, serving on 127.0.0.1:8100
    python examples/gateway_agent.py             # another: plays Household episodes through it

The policy being trained reads the prompts it was warm-started on: the preset's chat layout
(household-tiny: the bare observation with the admissible actions, "(tried)" marks, no system
prompt, the reply a bare action). The program asks the gateway for it (GET /layout) and builds
Household's ChatEnv with it, so each observation is worded as in training. Each round it plays
--tasks training tasks, each --group-size times at once (one group: the estimator compares a
task's episodes with each other), and reports every episode's reward with each call's reward,
state (GiGPO's anchor) and validity. It stops when the gateway closes (training is over) or
after --rounds rounds. Needs `pip install 'agentgym-credit[train,web,openai]'`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import random
import time
from fnmatch import fnmatch

import httpx
import openai

from agentgym.registration import get_task_space
from agentgym.rollout import make_chat_env


def training_tasks(layout: dict) -> list:
    """The split the preset trains on, narrowed to its categories and task filter (the gateway
    refuses a held-out task: the trainer evaluates on those)."""
    space = get_task_space(layout["env_id"])
    tasks = space.split(layout["split"])
    if layout["categories"]:
        tasks = [t for t in tasks if any(fnmatch(space.category(t), c) for c in layout["categories"])]
    return [t for t in tasks if all(t.params.get(k) == v or isinstance(v, list) and t.params.get(k) in v
                                    for k, v in layout["task_filter"].items())]


def wait_for_layout(gateway: str, http: httpx.Client, wait_s: float) -> dict:
    """GET /layout, once the gateway serves: it does after its warm start and its evaluation before RL."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return http.get(f"{gateway}/layout").raise_for_status().json()
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise SystemExit(f"no gateway at {gateway} after {wait_s:.0f} s: start `agentgym gateway --train ...`")
            time.sleep(2)


def play(gateway: str, layout: dict, task, seed: int, episode: dict, http: httpx.Client) -> tuple[float, int, int]:
    """One episode: the env's observations as chat messages, the policy's replies as actions."""
    env = make_chat_env(layout["env_id"], layout["env_kwargs"], **layout["chat"])
    messages, info = env.reset(seed=seed, options={"task": task})
    client = openai.OpenAI(base_url=episode["base_url"], api_key="unused", http_client=http)
    rewards, states, valid = [], [], []
    try:
        while True:
            states.append(str(info.get("anchor", "")))
            reply = client.chat.completions.create(model=layout["model"], messages=messages,
                                                   max_tokens=layout["max_tokens"], temperature=layout["temperature"])
            messages, reward, terminated, truncated, info = env.step(reply.choices[0].message.content or "")
            rewards.append(float(reward))
            valid.append(bool(info["action_valid"]))
            if terminated or truncated:
                break
    finally:
        env.close()
    http.post(f"{gateway}/episodes/{episode['id']}/reward", json={
        "reward": float(info["score"]), "success": bool(info["success"]), "step_rewards": rewards,
        "states": states, "valid": valid}).raise_for_status()
    return float(info["score"]), sum(valid), len(valid)


def gateway_gone(exc: Exception) -> bool:
    """Whether a failed request means the gateway no longer serves (training is over), not a
    connection dropped on the way (the episode it was in is abandoned; the others go on)."""
    cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
    return isinstance(cause, httpx.ConnectError)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", default="http://127.0.0.1:8100", help="the gateway's address")
    parser.add_argument("--tasks", type=int, default=8, help="tasks per round")
    parser.add_argument("--group-size", type=int, default=None, help="episodes per task (default: the preset's)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="stop after this many rounds (0: until the gateway closes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wait-s", type=float, default=3600, help="how long to wait for the gateway to serve")
    args = parser.parse_args()
    gw = args.gateway.rstrip("/")
    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=256, max_keepalive_connections=256)) as http:
        layout = wait_for_layout(gw, http, args.wait_s)
        group_size = args.group_size or layout["group_size"]
        tasks, rng = training_tasks(layout), random.Random(args.seed)
        print(f"playing {layout['env_id']} with chat layout {layout['chat']}")
        n = 0
        while not args.rounds or n < args.rounds:
            try:
                jobs = []
                for task in rng.sample(tasks, args.tasks):  # a round's episodes opened first: its groups stay whole
                    for _ in range(group_size):
                        episode = http.post(f"{gw}/episodes", json={"group": f"{n}:{task.task_id}",
                                                                      "task_id": task.task_id}).raise_for_status()
                        jobs.append((task, rng.randrange(2**31), episode.json()))
                with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
                    played = list(pool.map(lambda job: play(gw, layout, *job, http), jobs))
            except (httpx.TransportError, openai.APIConnectionError) as exc:
                if gateway_gone(exc):
                    print("the gateway closed: training is over")
                    return
                print(f"round {n + 1}: an episode failed ({type(exc).__name__}: {exc}); playing on", flush=True)
                n += 1
                continue
            n += 1
            scores, valid, steps = zip(*played)
            print(f"round {n}: mean reward {sum(scores) / len(scores):.3f} over {len(scores)} episodes, "
                  f"{sum(valid)} of {sum(steps)} actions valid", flush=True)


if __name__ == "__main__":
    main()
