"""The gateway's figures (docs/gateway.md): the same household episodes played by our built-in
rollout and by a plain `openai`-client agent program through `agentgym gateway`.

    python benchmarks/gateway_figures.py correctness [--model DIR] [--tasks 8]
    python benchmarks/gateway_figures.py overhead    [--model DIR] [--reps 2]
    python benchmarks/gateway_figures.py throughput  [--model DIR] [--clients 32] [--seconds 20]

correctness: per task, one episode with the same reset seed and sampling seed through `collect`
and through the gateway (windowed prompts as the main job, and history="full" where the gateway
continues conversations at the token level): prompt ids, sampled ids and logprobs compared step by
step; then one training iteration (the trainer's run_iteration, household-tiny's GiGPO) from each
set of trajectories, starting from the same weights, and the largest weight difference.
overhead: seconds per iteration (48 episodes = 8 tasks x 6 + the update) built-in vs gateway, the
gateway's episodes played by 48 concurrent client threads. throughput: requests/s the gateway
answers with N concurrent clients (short prompts, 12 new tokens).
Results: docs/gateway_figures.json, one key per figure, written as each lands. No model given: the
household-tiny preset's tiny model is built (random weights) under runs/gateway-figures/.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import os
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "gateway_figures.json"
ENV = "agentgym/Household-v0"


def save(key: str, value: dict) -> None:
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    data[key] = value
    OUT.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({key: value}, indent=2))


def config(model: str | None, run_dir: str, extra=()):
    from agentgym.trainers.config import load_config

    over = [f"run_dir={run_dir}", "torch_threads=1", "sft.enabled=false", *extra]
    over += [f"policy.model={model}", "tiny.build=false"] if model else []
    return load_config("household-tiny", over)


def start_model(cfg) -> Path:
    from agentgym.trainers.run_setup import prepare_start_model

    path, _ = prepare_start_model(cfg, Path(cfg.run_dir), log=lambda line: None, session=None)
    return Path(path)


def train_tasks(cfg, n: int) -> list:
    from agentgym.registration import get_task_space
    from agentgym.trainers.task_selection import select_train_tasks

    return select_train_tasks(cfg, get_task_space(cfg.env.id))[:n]


def builtin(policy, cfg, tasks, chat, seeds, group_size=1, batched=False):
    from agentgym.policies.base import SamplingParams
    from agentgym.rollout import collect

    r = cfg.rollout
    if batched:  # one rollout of every task x group, as the trainer plays an iteration
        return collect(cfg.env.id, tasks, policy, group_size, seed=seeds[0], chat=chat, env_kwargs=cfg.env.env_kwargs,
                       sampling=SamplingParams(temperature=r.temperature, max_new_tokens=r.max_new_tokens,
                                               seed=seeds[0]), session=None)
    out = []
    for task, seed in zip(tasks, seeds):  # one episode at a time: the same sampling stream as one client
        out += collect(cfg.env.id, [task], policy, 1, seed=seed, chat=chat, env_kwargs=cfg.env.env_kwargs,
                       sampling=SamplingParams(temperature=r.temperature, max_new_tokens=r.max_new_tokens, seed=seed),
                       session=None)
    return out


def agent_program(url: str, cfg, task, chat, seed: int, group: str, sampling_seed: int | None) -> None:
    """A user's agent program: the openai client in a loop over household's observations."""
    import httpx
    import openai

    from agentgym.chat import ChatConfig
    from agentgym.rollout import make_chat_env

    env = make_chat_env(cfg.env.id, cfg.env.env_kwargs, **ChatConfig.of(chat).kwargs())
    messages, info = env.reset(seed=seed, options={"task": task})
    ep = httpx.post(url + "/episodes", json={"group": group, "task_id": task.task_id}).json()
    client = openai.OpenAI(base_url=ep["base_url"], api_key="unused", max_retries=0, timeout=600)
    rewards, states, valid = [], [], []
    while True:
        states.append(str(info.get("anchor", "")))
        reply = client.chat.completions.create(model="agentgym", messages=messages, temperature=cfg.rollout.temperature,
                                               max_tokens=cfg.rollout.max_new_tokens, seed=sampling_seed)
        messages, reward, terminated, truncated, info = env.step(reply.choices[0].message.content or "")
        rewards.append(float(reward))
        valid.append(bool(info["action_valid"]))
        if terminated or truncated:
            break
    env.close()
    httpx.post(url + f"/episodes/{ep['id']}/reward", timeout=600, json={
        "reward": float(info["score"]), "success": bool(info["success"]), "step_rewards": rewards, "states": states,
        "valid": valid})


def through_gateway(policy, cfg, tasks, chat, seeds, group_size=1, concurrent=False):
    from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway
    from agentgym.integrations.gateway.recorder import Recorder

    recorder = Recorder(policy, model_names=("agentgym",), default_max_tokens=cfg.rollout.max_new_tokens)
    # groups named as the rollout names them: one rollout of all tasks (concurrent) or one per episode
    jobs = [(task, seeds[0] + g if concurrent else seed, f"{g if concurrent else 0}:{task.task_id}",
             None if concurrent else seed)
            for g, (task, seed) in enumerate(zip(tasks, seeds)) for _ in range(group_size)]
    with RunningGateway(recorder, GatewayConfig(port=0, max_batch=64)) as gateway:
        if concurrent:
            with concurrent_pool(len(jobs)) as pool:
                list(pool.map(lambda j: agent_program(gateway.url, cfg, j[0], chat, *j[1:]), jobs))
        else:
            for task, *rest in jobs:
                agent_program(gateway.url, cfg, task, chat, *rest)
    ids = recorder.closed_order if concurrent else [e for e in recorder.episodes]
    return [recorder.trajectory(recorder.episodes[i]) for i in ids], recorder


def concurrent_pool(n: int):
    return concurrent.futures.ThreadPoolExecutor(n)


def one_update(cfg, model: Path, trajectories):
    """One training iteration of the trainer's run_iteration from `model`'s weights; the weights after."""
    from agentgym.integrations.gateway.training import TrajectoryBatches
    from agentgym.trainers.run_setup import build_heads, make_optimizer, make_policy
    from agentgym.trainers.training import run_iteration

    torch.manual_seed(cfg.seed)
    policy = make_policy(cfg, model)
    heads = build_heads(cfg, policy)
    optimizer, scheduler = make_optimizer(cfg, policy, heads)
    batches = TrajectoryBatches(lambda k: trajectories, cfg.seed, policy, session=None)
    metrics = run_iteration(cfg, 0, policy, optimizer, scheduler, batches, heads)
    return {n: p.detach().clone() for n, p in policy.model.named_parameters()}, metrics


def compare_steps(a, b) -> dict:
    steps = same_ids = same_lp = 0
    worst = 0.0
    for ta, tb in zip(a, b):
        for sa, sb in zip(ta.steps, tb.steps):
            steps += 1
            same_ids += sa.prompt_ids == sb.prompt_ids and sa.response_ids == sb.response_ids
            same_lp += sa.response_logprobs == sb.response_logprobs
            if sa.response_ids == sb.response_ids:
                worst = max([worst, *(abs(x - y) for x, y in zip(sa.response_logprobs, sb.response_logprobs))])
    return {"episodes": len(a), "steps_builtin": sum(len(t.steps) for t in a),
            "steps_gateway": sum(len(t.steps) for t in b), "steps_same_ids": same_ids, "steps_same_logprobs": same_lp,
            "max_logprob_diff": worst, "same_rewards": [t.score for t in a] == [t.score for t in b]
            and all([s.reward for s in ta.steps] == [s.reward for s in tb.steps] for ta, tb in zip(a, b))}


def correctness(args) -> None:
    from agentgym.policies.hf import HFPolicy

    torch.set_num_threads(1)
    layouts = {"windowed (household-tiny)": None, "history=full": {"parser": "raw", "history": "full",
                                                                    "system_prompt": ""}}
    result = {"command": "python benchmarks/gateway_figures.py correctness " + " ".join(args.argv)}
    for name, chat_override in layouts.items():
        cfg = config(args.model, args.run_dir)
        model = start_model(cfg)
        chat = chat_override or cfg.env.chat
        cfg.env.chat = chat
        tasks = [t for t in train_tasks(cfg, args.tasks) for _ in range(2)]  # groups of 2 episodes (GiGPO's)
        seeds = [1000 + i for i in range(len(tasks))]
        policy = HFPolicy(model)
        a = builtin(policy, cfg, tasks, chat, seeds)
        b, recorder = through_gateway(policy, cfg, tasks, chat, seeds)
        row = compare_steps(a, b)
        row["gateway_splits"] = recorder.stats["splits"]
        wa, _ = one_update(cfg, model, a)
        wb, _ = one_update(cfg, model, b)
        row["max_weight_diff_after_one_iteration"] = max(float((wa[k] - wb[k]).abs().max()) for k in wa)
        row["max_weight_change"] = max(float((wa[k] - w).abs().max()) for k, w in
                                       HFPolicy(model).model.named_parameters())
        result[name] = row
        print(name, row, flush=True)
    save("correctness", result)


def overhead(args) -> None:
    from agentgym.policies.hf import HFPolicy

    torch.set_num_threads(1)
    cfg = config(args.model, args.run_dir)
    model = start_model(cfg)
    r = cfg.rollout
    tasks = train_tasks(cfg, r.tasks_per_iter)
    rows = []
    for rep in range(args.reps):
        for how in ("builtin", "gateway"):
            policy = HFPolicy(model)
            t0 = time.perf_counter()
            if how == "builtin":
                trajs = builtin(policy, cfg, tasks, cfg.env.chat, [7 + rep], r.group_size, batched=True)
            else:
                trajs, _ = through_gateway(policy, cfg, tasks, cfg.env.chat, [7 + rep] * len(tasks), r.group_size,
                                           concurrent=True)
            t_rollout = time.perf_counter() - t0
            _, metrics = one_update(cfg, model, trajs)
            rows.append({"rep": rep, "how": how, "rollout_s": t_rollout, "update_s": metrics["time"]["update_s"],
                         "iteration_s": t_rollout + metrics["time"]["iteration_s"],
                         "turns": sum(len(t.steps) for t in trajs)})
            print(rows[-1], flush=True)
    mean = {h: sum(x["iteration_s"] for x in rows if x["how"] == h) / args.reps for h in ("builtin", "gateway")}
    turns = {h: sum(x["turns"] for x in rows if x["how"] == h) / args.reps for h in ("builtin", "gateway")}
    save("overhead", {"command": "python benchmarks/gateway_figures.py overhead " + " ".join(args.argv),
                      "episodes_per_iteration": r.tasks_per_iter * r.group_size, "runs": rows,
                      "mean_iteration_s": mean, "mean_turns": turns,
                      "ratio_gateway_over_builtin": mean["gateway"] / mean["builtin"],
                      "ratio_per_turn": (mean["gateway"] / turns["gateway"]) / (mean["builtin"] / turns["builtin"])})


def throughput(args) -> None:
    import httpx

    from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway
    from agentgym.integrations.gateway.recorder import Recorder
    from agentgym.policies.hf import HFPolicy

    torch.set_num_threads(1)
    cfg = config(args.model, args.run_dir)
    policy = HFPolicy(start_model(cfg))
    recorder = Recorder(policy, model_names=("agentgym",), default_max_tokens=cfg.rollout.max_new_tokens)
    stop, done, errors = threading.Event(), [], []
    prompt = [{"role": "user", "content": "You are in the middle of a room. Your task is to: put a mug in cabinet 1."}]

    def client(url):
        with httpx.Client(timeout=600) as http:
            while not stop.is_set():
                r = http.post(url + "/v1/chat/completions", json={"model": "agentgym", "messages": prompt})
                (done if r.status_code == 200 else errors).append(time.perf_counter())

    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        threads = [threading.Thread(target=client, args=(gateway.url,)) for _ in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(3)  # warm up
        n0, t0 = len(done), time.perf_counter()
        time.sleep(args.seconds)
        n1, t1 = len(done), time.perf_counter()
        stop.set()
        for t in threads:
            t.join()
    save("throughput", {"command": "python benchmarks/gateway_figures.py throughput " + " ".join(args.argv),
                        "clients": args.clients, "seconds": t1 - t0, "requests": n1 - n0,
                        "requests_per_s": (n1 - n0) / (t1 - t0), "errors": len(errors),
                        "max_new_tokens": cfg.rollout.max_new_tokens, "torch_threads": 1})


def main() -> None:
    import sys

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figure", choices=["correctness", "overhead", "throughput"])
    parser.add_argument("--model", default=None, help="a model folder (default: build household-tiny's tiny model)")
    parser.add_argument("--run-dir", default="runs/gateway-figures")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    args.argv = sys.argv[2:]
    {"correctness": correctness, "overhead": overhead, "throughput": throughput}[args.figure](args)


if __name__ == "__main__":
    main()
