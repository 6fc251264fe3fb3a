"""What logging the rollout-trainer mismatch costs an iteration (`ppo.rollout_correction.measure`).

household-tiny from a warm start (--warm-start: the main job's SFT model), one batch of the preset
(8 tasks x 6 episodes, GiGPO advantages), one thread. Timed in CPU seconds, --rounds times each,
alternating, from the same weights and optimizer state:

    update            ppo_update without the measurement
    update_measured   ppo_update measuring the mismatch on its first optimizer step (the default)
    full_pass         the no-grad pass of the trainer's logprobs over the whole batch, what a
                      correction mode (or ppo.recompute_old_logprobs) adds to an iteration
    metrics           the measurement's own work, timed alone: rollout_correction.correct over
                      every token of the batch (the update measures only its first step's)

and the batch's rollout once, so each is a fraction of an iteration (rollout + update):

    python benchmarks/speed/mismatch_overhead.py --warm-start runs/household-tiny/sft_model \\
        --out docs/mismatch_overhead.json
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import code_version, command, load_average  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-start", required=True)
    parser.add_argument("--out", default="docs/mismatch_overhead.json")
    parser.add_argument("--work", default="runs/mismatch_overhead")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import numpy as np

    from agentgym.registration import get_task_space
    from agentgym.tasks.source import make_task_source_from_config
    from agentgym.trainers.batches import BatchProducer
    from agentgym.trainers.config import load_config
    from agentgym.trainers.estimators import compute_advantages
    from agentgym.trainers.learner import ppo_update, score_sequences
    from agentgym.trainers.rollout_correction import correct
    from agentgym.trainers.run_setup import build_heads, make_optimizer, make_policy
    from agentgym.trainers.samples import make_samples, tokenize_trajectories
    from agentgym.trainers.task_selection import select_train_tasks
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import update_clip

    set_torch_threads(1, print)
    cfg = load_config("household-tiny", [f"policy.model={args.warm_start}", "tiny.build=false", "sft.enabled=false",
                                         "torch_threads=1", f"run_dir={args.work}"])
    policy = make_policy(cfg.policy, args.warm_start)
    heads = build_heads(cfg.estimator, policy)
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    space = get_task_space(cfg.env.id)
    source = make_task_source_from_config(cfg.tasks, space, select_train_tasks(cfg.env, space, cfg.seed), seed=cfg.seed)
    producer = BatchProducer(cfg, policy, source)
    c0 = time.process_time()
    trajectories = producer.get(0).trajectories
    rollout_s = time.process_time() - c0
    producer.close()
    sequences = tokenize_trajectories(trajectories, cfg.ppo.sample_mode)
    samples = make_samples(sequences, compute_advantages(trajectories, cfg.estimator),
                           drop_abs_adv_below=cfg.ppo.drop_abs_adv_below)
    weights, opt_state, sched_state = (copy.deepcopy(policy.model.state_dict()), copy.deepcopy(optimizer.state_dict()),
                                       copy.deepcopy(scheduler.state_dict()))
    clip = update_clip(cfg.ppo, cfg.estimator.name)
    times: dict[str, list[float]] = {"update": [], "update_measured": [], "full_pass": [], "metrics": []}
    measured = None
    for r in range(args.rounds):
        for arm in (("update", "update_measured") if r % 2 == 0 else ("update_measured", "update")):
            policy.model.load_state_dict(weights)
            optimizer.load_state_dict(opt_state)
            scheduler.load_state_dict(sched_state)
            c0 = time.process_time()
            out = ppo_update(cfg.ppo, clip, policy, optimizer, scheduler, samples, np.random.default_rng(0), 0,
                             estimator=cfg.estimator,
                             mismatch=cfg.ppo.rollout_correction if arm == "update_measured" else None)
            times[arm].append(time.process_time() - c0)
            measured = out.get("mismatch", measured)
        policy.model.load_state_dict(weights)
        c0 = time.process_time()
        trainer = [[0.0] + logp.tolist() for logp, _ in score_sequences(policy, sequences, cfg.ppo.micro_batch_size,
                                                                       want_hidden=False)]
        times["full_pass"].append(time.process_time() - c0)
        c0 = time.process_time()
        correct(cfg.ppo.rollout_correction, [s.loss_mask for s in sequences], trainer,
                [s.old_logprobs for s in sequences])
        times["metrics"].append(time.process_time() - c0)

    median = {k: statistics.median(v) for k, v in times.items()}
    iteration = rollout_s + median["update"]
    record = {
        "command": command(__file__, sys.argv[1:]), "code_version": code_version(), "load_average": load_average(),
        "setup": {"preset": "household-tiny", "warm_start": args.warm_start, "episodes": len(trajectories),
                  "samples": len(samples), "optimizer_steps": out["optimizer_steps"], "rounds": args.rounds,
                  "torch_threads": 1},
        "cpu_s": {"rollout": rollout_s, **{k: v for k, v in times.items()}},
        "median_cpu_s": median,
        # per round, measured minus not: the update's own run-to-run noise is of the same size
        "paired_difference_cpu_s": [a - b for a, b in zip(times["update_measured"], times["update"])],
        "measurement_cpu_s": median["update_measured"] - median["update"],
        "measurement_share_of_iteration": (median["update_measured"] - median["update"]) / iteration,
        "full_pass_share_of_iteration": median["full_pass"] / iteration,
        "mismatch": measured,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    shown = ("median_cpu_s", "paired_difference_cpu_s", "measurement_share_of_iteration",
             "full_pass_share_of_iteration")
    print(json.dumps({k: record[k] for k in shown}, indent=1))


if __name__ == "__main__":
    main()
