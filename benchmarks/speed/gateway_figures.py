"""The gateway's figures (docs/gateway.md): the same household episodes played by our built-in
rollout and by a plain `openai`-client agent program through `agentgym gateway`.

    python benchmarks/speed/gateway_figures.py correctness [--model DIR] [--tasks 8]
    python benchmarks/speed/gateway_figures.py overhead    [--model DIR] [--reps 2]
    python benchmarks/speed/gateway_figures.py throughput  [--model DIR] [--clients 32] [--seconds 20]
    python benchmarks/speed/gateway_figures.py learning --model runs/household-tiny/sft_model [--seeds 0 1 2]
        [--arms gateway builtin] [--iterations 60] [--set key=value ...]

correctness: per task, one episode with the same reset seed and sampling seed through `collect`
and through the gateway (windowed prompts as the main job, and history="full" where the gateway
continues conversations at the token level): prompt ids, sampled ids and logprobs compared step by
step; then one training iteration (the trainer's run_iteration, household-tiny's GiGPO) from each
set of trajectories, starting from the same weights, and the largest weight difference.
overhead: seconds per iteration (48 episodes = 8 tasks x 6 + the update) built-in vs gateway, the
gateway's episodes played by 48 concurrent client threads. throughput: requests/s the gateway
answers with N concurrent clients (short prompts, 12 new tokens). learning: per seed, the same
agent program trained through the gateway (`train_through_gateway`, household-tiny's settings) from
the warm start, and `agentgym train` on the same settings (the baseline it should match); held-out
success of the warm start and of each arm's final model (the trainer's evaluation, sampled with the
seed); each (arm, seed) is saved as it lands and a rerun skips those done (resumable); the paired
interval of an arm's gain bootstraps over held-out tasks the per-task mean over seeds of after - before.
Results: docs/gateway_figures.json (or $GATEWAY_FIGURES_OUT), one key per figure, written as each lands. No model given: the
household-tiny preset's tiny model is built (random weights) under runs/gateway-figures/.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "docs" / "gateway_figures.json"
ENV = "agentgym/Household-v0"


def save(key: str, value: dict) -> None:
    global OUT
    OUT = Path(os.environ.get("GATEWAY_FIGURES_OUT", OUT))
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

    return select_train_tasks(cfg.env, get_task_space(cfg.env.id), cfg.seed)[:n]


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


def http_client():
    """One HTTP connection pool for every episode of the program, as a program keeps one client
    (a new httpx/openai client per episode loads the system's TLS certificates each time: 20-30 ms)."""
    import httpx

    global HTTP
    with HTTP_LOCK:
        if HTTP is None:
            HTTP = httpx.Client(timeout=600, limits=httpx.Limits(max_connections=512, max_keepalive_connections=512))
    return HTTP


HTTP, HTTP_LOCK = None, threading.Lock()


def agent_program(url: str, cfg, task, chat, seed: int, group: str, sampling_seed: int | None) -> None:
    """A user's agent program: the openai client in a loop over household's observations."""
    import openai

    from agentgym.chat import ChatConfig
    from agentgym.rollout import make_chat_env

    http = http_client()
    env = make_chat_env(cfg.env.id, cfg.env.env_kwargs, **ChatConfig.of(chat).kwargs())
    messages, info = env.reset(seed=seed, options={"task": task})
    ep = http.post(url + "/episodes", json={"group": group, "task_id": task.task_id}).json()
    client = openai.OpenAI(base_url=ep["base_url"], api_key="unused", max_retries=0, http_client=http)
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
    http.post(url + f"/episodes/{ep['id']}/reward", json={
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
    policy = make_policy(cfg.policy, model)
    heads = build_heads(cfg.estimator, policy)
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
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
    result = {"command": command(__file__, ["correctness", *args.argv])}
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
    import openai  # noqa: F401  (imported once before any timing, as a program imports it at its start)

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
            t0, c0 = time.perf_counter(), time.process_time()  # CPU: every thread (the clients too)
            if how == "builtin":
                trajs = builtin(policy, cfg, tasks, cfg.env.chat, [7 + rep], r.group_size, batched=True)
                batch_size = None
            else:
                trajs, recorder = through_gateway(policy, cfg, tasks, cfg.env.chat, [7 + rep] * len(tasks),
                                                  r.group_size, concurrent=True)
                batch_size = recorder.stats["calls"] / max(recorder.stats["batches"], 1)
            t_rollout, cpu_rollout = time.perf_counter() - t0, time.process_time() - c0
            _, metrics = one_update(cfg, model, trajs)
            rows.append({"rep": rep, "how": how, "rollout_s": t_rollout, "update_s": metrics["time"]["update_s"],
                         "iteration_s": t_rollout + metrics["time"]["iteration_s"], "rollout_cpu_s": cpu_rollout,
                         "iteration_cpu_s": time.process_time() - c0, "load_1min": os.getloadavg()[0],
                         "turns": sum(len(t.steps) for t in trajs), "mean_requests_per_engine_call": batch_size})
            print(rows[-1], flush=True)
    def mean(key: str) -> dict:
        return {h: sum(x[key] for x in rows if x["how"] == h) / args.reps for h in ("builtin", "gateway")}

    wall, cpu, turns = mean("iteration_s"), mean("iteration_cpu_s"), mean("turns")
    save("overhead", {"command": command(__file__, ["overhead", *args.argv]),
                      "episodes_per_iteration": r.tasks_per_iter * r.group_size, "runs": rows,
                      "mean_iteration_s": wall, "mean_iteration_cpu_s": cpu, "mean_rollout_s": mean("rollout_s"),
                      "mean_rollout_cpu_s": mean("rollout_cpu_s"), "mean_turns": turns,
                      "ratio_gateway_over_builtin": wall["gateway"] / wall["builtin"],
                      "ratio_cpu_gateway_over_builtin": cpu["gateway"] / cpu["builtin"],
                      "ratio_per_turn": (wall["gateway"] / turns["gateway"]) / (wall["builtin"] / turns["builtin"])})


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
    save("throughput", {"command": command(__file__, ["throughput", *args.argv]),
                        "clients": args.clients, "seconds": t1 - t0, "requests": n1 - n0,
                        "requests_per_s": (n1 - n0) / (t1 - t0), "errors": len(errors),
                        "max_new_tokens": cfg.rollout.max_new_tokens, "torch_threads": 1,
                        "mean_requests_per_engine_call": recorder.stats["calls"] / max(recorder.stats["batches"], 1)})


def learning(args) -> None:
    """Per seed: the warm start's held-out success (`before`), then each arm's run from it and its
    held-out success after (`gateway`: the agent program trained through the gateway; `builtin`:
    `agentgym train` on the same settings, the baseline the gateway should match). Each
    (arm, seed) lands in the JSON as it finishes; a rerun skips what landed."""
    from agentgym.evaluation.stats import paired_gain
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.trainers.task_selection import write_eval_tasks
    from agentgym.trainers.training import evaluate_policy

    if not args.model:
        raise SystemExit("learning: give --model, the main job's warm start (runs/household-tiny/sft_model after "
                         "`agentgym train household-tiny`)")
    torch.set_num_threads(1)
    out = Path(os.environ.get("GATEWAY_FIGURES_OUT", OUT))
    result = json.loads(out.read_text()).get("learning", {}) if out.exists() else {}
    result.update({"command": command(__file__, ["learning", *args.argv]),
                   "model": str(args.model), "iterations": args.iterations, "overrides": args.set})
    for arm in args.arms:
        for seed in args.seeds:
            runs = result.setdefault(arm, {})
            if str(seed) in runs:
                continue  # resumable: landed in an earlier run
            run_dir = Path(args.run_dir) / f"learning-{arm}-seed{seed}"
            cfg = config(args.model, str(run_dir), [f"seed={seed}", f"iterations={args.iterations}", "eval.every=0",
                                                    *args.set])
            eval_path = write_eval_tasks(cfg.eval, cfg.env, get_task_space(cfg.env.id), Path(args.run_dir))
            if str(seed) not in result.setdefault("before", {}):  # the warm start, sampled with this seed
                before = evaluate_policy(cfg.eval, cfg.env, HFPolicy(args.model), eval_path, seed, rollout=cfg.rollout,
                                         session=None)
                result["before"][str(seed)] = {"success": before["success_rate"],
                                               "per_task": before["per_task_success"]}
                save("learning", summarize_learning(result, paired_gain))
            t0, c0 = time.perf_counter(), time.process_time()
            after = (train_gateway_arm if arm == "gateway" else train_builtin_arm)(cfg, seed, args.iterations)
            train_s, train_cpu_s = time.perf_counter() - t0, time.process_time() - c0
            after = after or evaluate_policy(cfg.eval, cfg.env, HFPolicy(run_dir / "final_model"), eval_path, seed,
                                             rollout=cfg.rollout, session=None)
            runs[str(seed)] = {"success": after["success_rate"], "per_task": after["per_task_success"],
                               "train_s": train_s, "train_cpu_s": train_cpu_s,
                               "mean_load_1min": os.getloadavg()[0]}
            save("learning", summarize_learning(result, paired_gain))


def train_gateway_arm(cfg, seed: int, iterations: int) -> None:  # evaluated by the caller
    """The agent program trained through the gateway: one iteration's episodes at a time, concurrently."""
    from agentgym.integrations.gateway.app import GatewayConfig
    from agentgym.integrations.gateway.training import train_through_gateway

    r = cfg.rollout
    tasks = train_tasks(cfg, r.tasks_per_iter * iterations)
    ready, urls, failed = threading.Event(), [], []

    def trainer() -> None:
        try:
            train_through_gateway(cfg=cfg, gateway_cfg=GatewayConfig(port=0), episodes_per_iter=r.tasks_per_iter *
                                  r.group_size, log=print, on_ready=lambda url: (urls.append(url), ready.set()),
                                  session=None)
        except BaseException as exc:
            failed.append(exc)
            ready.set()
            raise

    thread = threading.Thread(target=trainer)
    thread.start()
    ready.wait()
    for it in range(iterations if not failed else 0):
        batch = tasks[it * r.tasks_per_iter:(it + 1) * r.tasks_per_iter]
        jobs = [(task, seed * 100000 + it * 100 + g, f"{it}:{g}:{task.task_id}") for g, task in enumerate(batch)
                for _ in range(r.group_size)]
        with concurrent_pool(len(jobs)) as pool:
            list(pool.map(lambda j: agent_program(urls[0], cfg, j[0], cfg.env.chat, j[1], j[2], None), jobs))
    thread.join()
    if failed:
        raise SystemExit(f"the gateway trainer failed: {failed[0]!r}")


def train_builtin_arm(cfg, seed: int, iterations: int) -> dict:
    """`agentgym train` on the same settings; its final evaluation (the same evaluate function,
    tasks and seed as the gateway arm's) read back from its metrics.jsonl."""
    from agentgym.trainers.training import train

    train(cfg, log=print, session=None)
    final = [row for row in map(json.loads, (Path(cfg.run_dir) / "metrics.jsonl").read_text().splitlines())
             if "eval/success_rate" in row][-1]
    prefix = "eval/per_task_success/"
    return {"success_rate": final["eval/success_rate"],
            "per_task_success": {k[len(prefix):]: v for k, v in final.items() if k.startswith(prefix)}}


def summarize_learning(result: dict, paired_gain) -> dict:
    """Each arm's gain over the warm start: per held-out task, the mean over the arm's seeds of
    after - before (each seed's before sampled with that seed), bootstrapped over tasks (a task's
    seeds are not independent draws, so the tasks are the resampled unit)."""
    def per_task(rows: dict, seeds: list) -> dict:
        tasks = set.intersection(*(set(rows[s]["per_task"]) for s in seeds))
        return {t: sum(rows[s]["per_task"][t] for s in seeds) / len(seeds) for t in tasks}

    before = result.get("before", {})
    gains = {}
    for arm in ("gateway", "builtin"):
        seeds = [s for s in result.get(arm, {}) if s in before]
        if seeds:
            g = paired_gain(per_task(before, seeds), per_task(result[arm], seeds))
            gains[arm] = {"seeds": seeds, "value": g.value, "low": g.low, "high": g.high,
                          "per_seed": {s: result[arm][s]["success"] - before[s]["success"] for s in seeds}}
    both = [s for s in result.get("gateway", {}) if s in result.get("builtin", {})]
    if both:
        g = paired_gain(per_task(result["builtin"], both), per_task(result["gateway"], both))
        gains["gateway_minus_builtin"] = {"seeds": both, "value": g.value, "low": g.low, "high": g.high}
    result["paired_gain"] = gains
    return result


def main() -> None:
    import sys

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figure", choices=["correctness", "overhead", "throughput", "learning"])
    parser.add_argument("--model", default=None, help="a model folder (default: build household-tiny's tiny model)")
    parser.add_argument("--run-dir", default="runs/gateway-figures")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="learning: household-tiny overrides, key=value")
    parser.add_argument("--iterations", type=int, default=60, help="learning: updates per seed (household-tiny's)")
    parser.add_argument("--arms", nargs="+", choices=["gateway", "builtin"], default=["gateway", "builtin"],
                        help="learning: the gateway run, and `agentgym train` on the same settings")
    args = parser.parse_args()
    args.argv = sys.argv[2:]
    {"correctness": correctness, "overhead": overhead, "throughput": throughput, "learning": learning}[args.figure](args)


if __name__ == "__main__":
    main()
