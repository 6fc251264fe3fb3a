"""RL against its honest baselines at matched compute (issue 35), writing docs/rl_vs_baselines.json.

The setting: household-tiny with a demonstrator that idles before each command with probability
0.6 (`sft.dawdle_prob=0.6`, the searching expert, slips 0.2) at the 12-step limit, and a warm
start that imitates all of its demonstrations, failed ones too (`sft.filter_success=false`).
Imitation has a low ceiling here (the demonstrator's own held-out success, measured by the job
`ceiling`); RL can pass it by idling less.

Per seed, every arm starts from the same warm start (`warm/seedN`) and is evaluated at its end
on the same held-out episodes (final evaluation only, never the best seen), and on
heldout_unseen:

    rl              GiGPO, the preset's RL (`iterations`, tasks_per_iter x group_size episodes each)
    sft_unfiltered  B1: more SFT on fresh demonstrations of the same demonstrator, all of them
    sft_filtered    B2: the same, successful demonstrations only
    rft             B3: rejection-sampling fine-tuning: the policy plays the same rollout budget as
                    RL (iterations x tasks_per_iter x group_size episodes), its successful
                    episodes' valid steps join a buffer, and it trains on batches of the buffer

Matched compute: each baseline takes exactly the optimizer steps of the seed's RL run (RFT: the
RL run's steps of each iteration); B1/B2's batches are sized so that a step trains RL's mean
tokens per step, RFT's hold RL's mean samples per step (its samples are the policy's own steps,
as RL's are). Both are recorded per arm (`compute`: optimizer_steps, tokens, and RL's). Wall time
is not matched.

Learning rates: each arm's is chosen on validation tasks (resumable_runs.validation_tasks: fresh
tasks of the same categories drawn from the generator with seed 35000035, never held out, never
heldout_unseen's combinations, the tuning seed's training pool removed), by runs on a tuning seed
(`--tune-seed`, not one of `--seeds`) at the full budget: the arm's final runs use the rate with
the best validation success. The baselines' tuning runs match the compute of the chosen RL rate.

Every arm x seed is a job with its own folder under --runs and its own checkpoints; the done-table
(<runs>/done.json) lists finished jobs: running the script again skips them and resumes the
others. docs/rl_vs_baselines.json is written from whatever has finished:

    heldout_tasks, episodes_per_task, demonstrator_ceiling {heldout, heldout_unseen},
    warm_start {seeds, finals}                                  (the RL runs' evaluations before RL)
    arms.<arm>: {seeds, finals, finals_unseen, lr, compute [{seed, optimizer_steps, tokens}]},
    rl_minus_best_baseline {baseline, diff, ci, pairs, seeds}   (paired per task, pooled over seeds)
    sft_unfiltered_minus_warm_start {diff, ci, ...}             (is more imitation flat?)
    rl_minus_ceiling, lr_choice, power, runs_done

    python benchmarks/learning/rl_vs_baselines.py --seeds 0 1 2 3 4 --parallel 2        # the experiment
    python benchmarks/learning/rl_vs_baselines.py --seeds 0 1 2 3 4 --report-only        # JSON from what is done
    python benchmarks/learning/rl_vs_baselines.py --seeds 0 --tune-seed 9 --runs /tmp/x --out /tmp/x.json \\
        --lrs-rl 1e-4 3e-4 --lrs-sft 1e-3 -- iterations=1 sft.num_tasks=8 ...   # a smoke test

docs/rl_vs_baselines.json is the experiment with every policy decoding within the admissible
actions (`-- rollout.admissible_only=true`; the rates given, not tuned: `--lrs-rl 1e-4 --lrs-sft
1e-3`, and RFT's `--arms rl rft --lrs-sft 1e-4` in a second --runs folder); without it the policy
decodes freely (docs/rl_vs_baselines_free_decoding.json, where RL lost).

Config overrides (for every arm) come last, after `--`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.harness.provenance import ROOT, command  # noqa: E402

PRESET = "household-tiny"
# The setting of issue 35 on top of the preset; checkpoints every 5 iterations; no safety stop
# (a resumed run restarts the clock, and a run is defined by its iterations).
SETTING = ["sft.dawdle_prob=0.6", "sft.filter_success=false", "checkpoint_every=5", "eval.every=0",
           "time_budget_s=null", "log.save_trajectories_every=0", "log.plot=false", "log.tensorboard=false"]
ARMS = ("rl", "sft_unfiltered", "sft_filtered", "rft")
BASELINES = ARMS[1:]
DEMO_SEED_OFFSET = 1000  # fresh demonstrations: the demonstrator plays with another seed than the warm start's


class NoSuccessfulRollouts(RuntimeError):
    """RFT's rollout budget produced no successful episode: nothing to fine-tune on."""


def config(args, seed: int, folder: Path, *extra: str):
    from agentgym.trainers.config import load_config

    threads = [f"torch_threads={args.threads}"] if args.threads else []
    return load_config(PRESET, [*SETTING, *args.overrides, f"seed={seed}", f"run_dir={folder}", *threads, *extra])


# --- the jobs -------------------------------------------------------------------------------------
def lr_grid(args, arm: str) -> list[float]:
    return args.lrs_rl if arm == "rl" else args.lrs_sft


def tuned(args, arm: str) -> bool:
    return len(lr_grid(args, arm)) > 1


def jobs(args) -> list[rr.Job]:
    """Every run of the experiment with what it waits for; the scheduler runs them in order."""
    any_tuned = any(tuned(args, a) for a in args.arms)
    out = [rr.Job("ceiling")]
    out += [rr.Job(f"warm/seed{s}") for s in sorted({*args.seeds, *([args.tune_seed] if any_tuned else [])})]
    warm_tune = (f"warm/seed{args.tune_seed}",)
    # RL on the tuning seed whenever any rate is tuned: the baselines' tuning runs match its compute
    rl_tunes = tuple(rr.tune_key("rl", lr) for lr in args.lrs_rl) if any_tuned else ()
    out += [rr.Job(key, warm_tune) for key in rl_tunes]
    for arm in BASELINES:
        if arm in args.arms and tuned(args, arm):
            out += [rr.Job(rr.tune_key(arm, lr), warm_tune + rl_tunes) for lr in lr_grid(args, arm)]
    for seed in args.seeds:
        for arm in args.arms:
            after = (f"warm/seed{seed}",) + tuple(rr.tune_key(arm, lr) for lr in lr_grid(args, arm) if tuned(args, arm))
            if arm != "rl":
                after += (f"rl/seed{seed}",)
            out.append(rr.Job(f"{arm}/seed{seed}", after))
    return out


def chosen_lr(table: rr.DoneTable, args, arm: str) -> float:
    """The arm's rate: the only one given, or the best validation success of its tuning runs."""
    return rr.best_rate(table, arm, lr_grid(args, arm))


def run_job(args, key: str) -> dict:
    table = rr.DoneTable(Path(args.runs) / "done.json")  # read only: the scheduler writes it
    folder = rr.job_dir(Path(args.runs), key)
    log = print
    if key == "ceiling":
        return demonstrator_ceiling(config(args, args.seeds[0], folder), folder)
    if key.startswith("warm/"):
        return rr.run_warm(config(args, rr.arm_and_seed(key)[1], folder), folder, log)
    job = rr.arm_job(key, args.tune_seed, lambda arm: chosen_lr(table, args, arm), "rl", ("rl",))
    arm, seed, lr = job.arm, job.seed, job.lr
    cfg = config(args, seed, folder, *rr.warm_overrides(table[f"warm/seed{seed}"]), f"ppo.lr={lr}")
    rr.use_threads(cfg)
    evals = rr.arm_evals(cfg, job, folder, lambda: validation_file(args, cfg, folder))
    if arm == "rl":
        return {"arm": arm, "seed": seed, **rr.run_rl(cfg, folder, evals, log)}
    budget = rr.matched_budget(table, job)
    if arm == "rft":  # its samples are the policy's own steps, as RL's: RL's samples per step
        batch_size = max(1, round(budget["samples"] / budget["optimizer_steps"]))
        stats = run_rft_arm(cfg, folder, budget["steps_per_iteration"], batch_size, lr, seed, log)
    else:
        stats = run_sft_arm(cfg, folder, arm, budget, lr, seed, log)
        batch_size = stats["batch_size"]
    results = rr.evaluate_trained(cfg, folder, job, evals)
    return {"arm": arm, "seed": seed, "lr": lr, "matched_to": job.matched_to, "batch_size": batch_size,
            "compute": {"optimizer_steps": stats["steps"], "tokens": stats["tokens"],
                        "rl_optimizer_steps": budget["optimizer_steps"], "rl_tokens": budget["tokens"]},
            "train": stats, **results}


def validation_file(args, cfg, folder: Path) -> Path:
    from agentgym.registration import get_task_space
    from agentgym.tasks.splits import save_split
    from agentgym.trainers.task_selection import select_train_tasks

    pool = select_train_tasks(cfg.env, get_task_space(cfg.env.id), cfg.seed)
    path = folder / "validation.jsonl"
    save_split(path, rr.validation_tasks(cfg, args.val_tasks, exclude=pool))
    return path


def demonstrator_ceiling(cfg, folder: Path) -> dict:
    """The demonstrator's own success on the held-out sets, with the run's evaluation settings."""
    from agentgym.evaluation.evaluate import evaluate
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.registration import get_task_space

    out = {"dawdle_prob": cfg.sft.dawdle_prob, "slip_prob": cfg.sft.slip_prob, "expert": cfg.sft.expert,
           "max_episode_steps": cfg.env.env_kwargs.get("max_episode_steps")}
    for split in (cfg.eval.split, "heldout_unseen"):
        demo = OraclePolicy(get_task_space(cfg.env.id), slip_prob=cfg.sft.slip_prob, seed=cfg.seed,
                            search=cfg.sft.expert == "searching", dawdle_prob=cfg.sft.dawdle_prob)
        result = evaluate(cfg.env.id, demo, split=str(rr.split_file(cfg, split, folder)),
                          episodes_per_task=cfg.eval.episodes_per_task, chat=cfg.env.chat,
                          env_kwargs=cfg.env.env_kwargs, seed=cfg.seed)
        out[split] = result.summary()["success_rate"]
        out[f"{split}_tasks"] = len(result.per_task)
    return out


def fresh_demonstrations(cfg, seed: int, filter_success: bool) -> list:
    """The demonstrator on the training tasks the warm start did not see (trainers/sft.py:run_sft
    took a permutation's first sft.num_tasks), with another seed."""
    import numpy as np

    from agentgym.registration import get_task_space
    from agentgym.trainers.sft import oracle_trajectories
    from agentgym.trainers.task_selection import select_train_tasks

    tasks = select_train_tasks(cfg.env, get_task_space(cfg.env.id), cfg.seed)
    seen = set(np.random.default_rng([seed, 7]).permutation(len(tasks))[: cfg.sft.num_tasks].tolist())
    fresh = [t for i, t in enumerate(tasks) if i not in seen]
    if not fresh:
        raise SystemExit("no training tasks left that the warm start did not see: raise env.fresh_tasks")
    return oracle_trajectories(cfg.env.id, fresh, cfg.env.chat, cfg.env.env_kwargs, seed=seed + DEMO_SEED_OFFSET,
                               executor=cfg.env.executor, slip_prob=cfg.sft.slip_prob,
                               search=cfg.sft.expert == "searching", dawdle_prob=cfg.sft.dawdle_prob,
                               filter_success=filter_success)


def run_sft_arm(cfg, folder: Path, arm: str, budget: dict, lr: float, seed: int, log,
                micro_batch_size: int | None = None) -> dict:
    """B1 / B2: RL's optimizer steps exactly, in batches sized so that a step trains RL's tokens
    per step on average (demonstration replies are shorter than sampled ones). micro_batch_size: the
    passes each step's gradient is accumulated over (a real model's whole batch in one pass does not
    fit in memory: household-smol's took 21 GB)."""
    from agentgym.trainers.run_setup import make_policy, quiet_transformers
    from agentgym.trainers.sft import sft_samples

    quiet_transformers()
    policy = make_policy(cfg.policy, cfg.policy.model)
    demos = fresh_demonstrations(cfg, seed, filter_success=arm == "sft_filtered")
    samples = sft_samples(policy, demos)
    if not samples:
        raise SystemExit(f"{arm}: the demonstrator left no samples (filtered: no successful demonstration)")
    steps = budget["optimizer_steps"]
    mean_len = sum(len(s) for s in samples) / len(samples)
    batch_size = max(1, round(budget["tokens"] / steps / mean_len))
    log(f"{arm}: {len(demos)} demonstrations, {len(samples)} samples; {steps} steps of {batch_size} at lr {lr:g}")
    stats = rr.sft_steps(policy, samples, folder, steps, batch_size, lr, seed=seed + DEMO_SEED_OFFSET, log=log,
                         micro_batch_size=micro_batch_size)
    return {**stats, "demonstrations": len(demos), "samples": len(samples), "batch_size": batch_size}


# --- B3: rejection-sampling fine-tuning -----------------------------------------------------------
def run_rft(policy, cfg, tasks: list, folder: Path, steps_per_iteration: list[int], batch_size: int, lr: float,
            seed: int, log=print, micro_batch_size: int | None = None) -> dict:
    """Iteration i: the policy plays rollout.tasks_per_iter tasks x rollout.group_size episodes
    (sampled as RL samples), the valid steps of its successful episodes join the buffer (its own
    tokens as targets), then steps_per_iteration[i] SFT steps on batches drawn from the buffer.
    Steps of iterations before the first success are taken once there is one. Checkpointed each
    iteration in `folder` (weights, optimizer, RNGs, buffer) and resumed from there. No success
    in the whole budget: NoSuccessfulRollouts, one line. micro_batch_size: the passes each step's
    gradient is accumulated over (rr.sft_update; None: one pass)."""
    import numpy as np
    import torch

    from agentgym.policies.base import SamplingParams
    from agentgym.rollout import collect
    from agentgym.trainers.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
    from agentgym.trainers.samples import sft_sample

    optimizer, scheduler = rr.sft_optimizer(policy, lr, sum(steps_per_iteration))
    state = {"iteration": 0, "evals": [], "steps": 0, "tokens": 0, "carry": 0, "episodes": 0, "successes": 0,
             "buffer": 0, "losses": []}
    buffer: list = []
    folder.mkdir(parents=True, exist_ok=True)
    buffer_file = folder / "rft_buffer.pt"
    if (checkpoint := latest_checkpoint(folder)) is not None:
        state = load_checkpoint(checkpoint, policy, optimizer, scheduler, {})
        saved = torch.load(buffer_file, weights_only=True) if state["buffer"] else {"prompt": [], "response": []}
        buffer = [sft_sample(p, r) for p, r in zip(saved["prompt"], saved["response"])][: state["buffer"]]
        log(f"RFT resumed at iteration {state['iteration']} ({checkpoint})")
    pairs = {"prompt": [], "response": []}
    for s in buffer:
        cut = s.loss_mask.index(1)
        pairs["prompt"].append(s.input_ids[:cut])
        pairs["response"].append(s.input_ids[cut:])
    last = len(steps_per_iteration) - 1
    for it in range(state["iteration"], len(steps_per_iteration)):
        rng = np.random.default_rng([seed, it, 35])
        chosen = [tasks[int(i)] for i in rng.choice(len(tasks), size=min(cfg.rollout.tasks_per_iter, len(tasks)),
                                                        replace=False)]
        sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                  max_new_tokens=cfg.rollout.max_new_tokens, seed=seed * 100_003 + it,
                                  admissible_only=cfg.rollout.admissible_only)
        trajectories = collect(cfg.env.id, chosen, policy, cfg.rollout.group_size, seed=seed * 100_003 + it,
                               sampling=sampling, chat=cfg.env.chat, env_kwargs=cfg.env.env_kwargs,
                               executor=cfg.env.executor, max_turns=cfg.env.max_turns)
        live = [t for t in trajectories if not t.infra_error]
        wins = [t for t in live if t.success]
        for t in wins:
            for s in t.steps:
                if s.action_valid and s.prompt_ids is not None and s.response_ids:
                    buffer.append(sft_sample(s.prompt_ids, s.response_ids))
                    pairs["prompt"].append(list(s.prompt_ids))
                    pairs["response"].append(list(s.response_ids))
        state["episodes"] += len(live)
        state["successes"] += len(wins)
        todo = steps_per_iteration[it] + state["carry"]
        if not buffer and it == last:
            raise NoSuccessfulRollouts(
                f"rft: no successful rollouts after its budget of {state['episodes']} episodes ({it + 1} iterations x "
                f"{cfg.rollout.tasks_per_iter} tasks x {cfg.rollout.group_size}): nothing to fine-tune on; start "
                "from a warm start that succeeds sometimes, or give RFT more iterations")
        state["carry"] = todo if not buffer else 0
        for _ in range(todo if buffer else 0):
            pick = rng.choice(len(buffer), size=batch_size, replace=len(buffer) < batch_size)
            loss, tokens = rr.sft_update(policy, optimizer, scheduler, [buffer[int(j)] for j in pick],
                                         micro_batch_size)
            state["steps"] += 1
            state["tokens"] += tokens
            state["losses"].append(loss)
        state["iteration"] = it + 1
        state["buffer"] = len(buffer)
        torch.save(pairs, buffer_file.with_suffix(".tmp"))
        buffer_file.with_suffix(".tmp").replace(buffer_file)  # before the checkpoint that counts it
        save_checkpoint(folder, state["iteration"], policy, optimizer, scheduler, {}, state)
        log(f"RFT iteration {it + 1}/{last + 1}: {len(wins)}/{len(live)} successful, buffer {len(buffer)}, "
            f"{state['steps']} steps")
    losses = state["losses"]
    return {"steps": state["steps"], "tokens": state["tokens"], "episodes": state["episodes"],
            "successes": state["successes"], "buffer": state["buffer"],
            "final_loss": float(np.mean(losses[-5:])) if losses else None}


def run_rft_arm(cfg, folder: Path, steps_per_iteration: list[int], batch_size: int, lr: float, seed: int, log,
                micro_batch_size: int | None = None) -> dict:
    from agentgym.registration import get_task_space
    from agentgym.trainers.run_setup import make_policy, quiet_transformers
    from agentgym.trainers.task_selection import select_train_tasks

    quiet_transformers()
    policy = make_policy(cfg.policy, cfg.policy.model)
    tasks = select_train_tasks(cfg.env, get_task_space(cfg.env.id), cfg.seed)
    return run_rft(policy, cfg, tasks, folder, steps_per_iteration, batch_size, lr, seed, log, micro_batch_size)


# --- the figures ----------------------------------------------------------------------------------
def report(args, table: rr.DoneTable) -> dict:
    import numpy as np

    finals = {arm: [table[f"{arm}/seed{s}"] for s in args.seeds if f"{arm}/seed{s}" in table] for arm in ARMS}
    arms = {}
    for arm, records in finals.items():
        arms[arm] = {"seeds": [r["seed"] for r in records],
                     "finals": [r["heldout"]["success_rate"] for r in records],
                     "finals_unseen": [r["heldout_unseen"]["success_rate"] for r in records],
                     "mean": float(np.mean([r["heldout"]["success_rate"] for r in records])) if records else None,
                     "lr": records[0]["lr"] if records else None,
                     "compute": [{"seed": r["seed"], "optimizer_steps": r["compute"]["optimizer_steps"],
                                  "tokens": r["compute"]["tokens"]} for r in records]}
    ceiling = table["ceiling"] if "ceiling" in table else None
    rl = {r["seed"]: r for r in finals["rl"]}
    best, contrast = None, None
    scored = [b for b in BASELINES if arms[b]["mean"] is not None]
    if scored and rl:
        best = max(scored, key=lambda b: arms[b]["mean"])
        paired = [r for r in finals[best] if r["seed"] in rl]
        contrast = {"baseline": best, **rr.paired_diff([rl[r["seed"]]["heldout"]["per_task_success"] for r in paired],
                                                       [r["heldout"]["per_task_success"] for r in paired])}
    # Is more imitation flat? B1 against the warm start it continued (the RL run's evaluation before
    # RL: the same tasks and episode seeds), paired per task over the seeds both have.
    warm = {r["seed"]: r["heldout_before"] for r in finals["rl"]}
    b1 = [r for r in finals["sft_unfiltered"] if r["seed"] in warm]
    more_sft = rr.paired_diff([r["heldout"]["per_task_success"] for r in b1],
                              [warm[r["seed"]]["per_task_success"] for r in b1]) if b1 else None
    any_final = next((r for rs in finals.values() for r in rs), None)
    n_tasks = len(any_final["heldout"]["per_task_success"]) if any_final else None
    lr_choice = {arm: {f"{lr:g}": table[rr.tune_key(arm, lr)]["validation"]["success_rate"]
                       for lr in lr_grid(args, arm) if rr.tune_key(arm, lr) in table} for arm in ARMS}
    episodes = config(args, 0, Path(args.runs)).eval.episodes_per_task
    all_jobs = jobs(args)
    return {
        "command": command(__file__, sys.argv[1:]),
        "setting": {"preset": PRESET, "overrides": SETTING + args.overrides},
        "heldout_tasks": n_tasks, "episodes_per_task": episodes,
        "demonstrator_ceiling": ceiling,
        "warm_start": {"seeds": sorted(warm), "finals": [warm[s]["success_rate"] for s in sorted(warm)]},
        "arms": arms,
        "rl_minus_best_baseline": contrast,
        "sft_unfiltered_minus_warm_start": more_sft,
        "rl_minus_ceiling": (arms["rl"]["mean"] - ceiling["heldout"]) if ceiling and arms["rl"]["mean"] is not None
        else None,
        "lr_choice": {"validation": f"{args.val_tasks} fresh tasks (generator seed {rr.VALIDATION_SEED}, tuning seed "
                                    f"{args.tune_seed}'s training pool removed)", "grids": lr_choice},
        "power": rr.power_statement(n_tasks, episodes, len(args.seeds)) if n_tasks else None,
        "runs_done": f"{sum(j.key in table for j in all_jobs)} of {len(all_jobs)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--tune-seed", type=int, default=100, help="the seed of the learning-rate tuning runs")
    parser.add_argument("--lrs-rl", type=float, nargs="+", default=[3e-5, 1e-4, 3e-4])
    parser.add_argument("--lrs-sft", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3], help="B1, B2, B3's grid")
    parser.add_argument("--val-tasks", type=int, default=100, help="validation tasks for the learning rates")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, one thread each when > 1")
    parser.add_argument("--runs", default="runs/rl_vs_baselines")
    parser.add_argument("--out", default=str(ROOT / "docs" / "rl_vs_baselines.json"))
    parser.add_argument("--report-only", action="store_true", help="write --out from the finished runs")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: one run, in its own process
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides for every arm, as for agentgym train")
    args = parser.parse_args()
    if args.tune_seed in args.seeds:
        parser.error(f"--tune-seed {args.tune_seed} is one of --seeds: the rates must be chosen on another seed")
    if "rl" not in args.arms and len(args.arms) > 0:
        parser.error("the baselines match the compute of the rl arm: keep rl in --arms")
    run_root = Path(args.runs)
    if args.job:
        rr.run_worker(run_root, args.job, lambda key: run_job(args, key), (NoSuccessfulRollouts,))
        return
    rr.check_settings(run_root, {"overrides": SETTING + args.overrides, "tune_seed": args.tune_seed,
                                 "lrs_rl": args.lrs_rl, "lrs_sft": args.lrs_sft, "val_tasks": args.val_tasks})
    out, failed = rr.schedule(args, jobs(args), report, __file__, run_root)
    for arm, a in out["arms"].items():
        print(f"{arm:15s} finals {[round(x, 3) for x in a['finals']]} lr {a['lr']} compute {a['compute']}")
    print(f"demonstrator ceiling {out['demonstrator_ceiling']}; RL - best baseline {out['rl_minus_best_baseline']}")
    print(f"{out['runs_done']} runs done; wrote {args.out}")
    rr.stop_if_failed(failed)


if __name__ == "__main__":
    main()
