"""TRL's GRPOTrainer (through agentgym.integrations.trl) vs agentgym's own trainer, in one run.

Both train the same tiny model (two copies of the same weights) with GRPO on the same tasks of
the same env, in the same order: `--tasks` tasks per iteration, `--group` episodes per task,
at most `--max-turns` turns of at most `--max-new-tokens` tokens, chat history "full", one
optimizer step per iteration over the whole batch, no KL, clip 0.2, the same learning rate.
agentgym trains one sequence per episode (`ppo.sample_mode=full`), as TRL must.

The two trainers alternate iteration by iteration (a TRL step, then an agentgym iteration,
run from a callback at the end of TRL's step), so a shared machine's load falls on both alike.
Printed per trainer: seconds per iteration (wall clock and this process's CPU time), generated
(model) tokens per iteration, generated tokens per second, and the ratio TRL / agentgym.
Also printed: the sequences and tokens each trainer runs its update on (agentgym's full mode
starts a new sequence wherever the re-rendered conversation does not extend the previous turn's
ids; the TRL adapter continues at the token level, so one sequence per episode).
The first iteration of each (warm-up) is left out of the means.

Usage: python benchmarks/trl_vs_agentgym.py [--iterations 6] [--tasks 4] [--group 4] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402

import agentgym  # noqa: E402

CHAT = {"history": "full", "show_admissible": True}


class FixedOrder:
    """A task source that hands out the task list in order, `n` at a time (what TRL's sampler
    does with shuffle_dataset=False)."""

    def __init__(self, tasks):
        self.tasks, self.i = list(tasks), 0

    def next_tasks(self, n):
        out = self.tasks[self.i:self.i + n]
        self.i += n
        return out

    def update(self, trajectories, advantages):
        pass

    def metrics(self):
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="agentgym/Household-v0")
    ap.add_argument("--model", default=None, help="HF folder; default: a tiny model built for the env")
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--tasks", type=int, default=4, help="tasks per iteration")
    ap.add_argument("--group", type=int, default=4, help="episodes per task (TRL's num_generations)")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--quick", action="store_true", help="3 iterations of 2 tasks x 2 episodes")
    args = ap.parse_args()
    if args.quick:
        args.iterations, args.tasks, args.group = 3, 2, 2
    torch.set_num_threads(1)
    torch.manual_seed(0)

    from transformers import TrainerCallback
    from trl import GRPOConfig  # noqa: F401  (checked import: the trl extra)

    from agentgym.integrations.trl import AgentGymRollout, grpo_config, grpo_trainer
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.config import load_config
    from agentgym.trainers.batches import BatchProducer
    from agentgym.trainers.loop import run_iteration
    from agentgym.trainers.setup import build_heads, make_optimizer, make_policy

    env_id = agentgym.registration.check_env_id(args.env)
    work = Path(tempfile.mkdtemp(prefix="trl_vs_agentgym_"))
    model_dir = args.model
    if model_dir is None:
        t = time.perf_counter()
        model_dir = build_tiny_model(work / "tiny", env_id=env_id, num_tasks=24, chat=CHAT)
        print(f"tiny model built in {time.perf_counter() - t:.0f}s: {model_dir}")
    tasks = agentgym.get_task_space(env_id).split("train")[: args.iterations * args.tasks]
    batch = args.tasks * args.group

    # --- agentgym's trainer, driven iteration by iteration --------------------------------------
    cfg = load_config({"env": {"chat": dict(CHAT)}}, [
        f"env.id={env_id}", f"policy.model={model_dir}", f"run_dir={work}/agentgym", f"iterations={args.iterations}",
        f"rollout.tasks_per_iter={args.tasks}", f"rollout.group_size={args.group}",
        f"rollout.max_new_tokens={args.max_new_tokens}", f"env.max_turns={args.max_turns}", "estimator.name=grpo",
        "ppo.sample_mode=full", "ppo.epochs=1", f"ppo.minibatch_size={batch}", f"ppo.micro_batch_size={batch}",
        f"ppo.lr={args.lr}", "ppo.clip_eps=0.2", "ppo.kl_coef=0.0", "eval.every=0", "log.plot=false",
        "log.tensorboard=false", "torch_threads=1",
    ])
    policy = make_policy(cfg, model_dir)
    heads = build_heads(cfg, policy)
    optimizer, scheduler = make_optimizer(cfg, policy, heads)
    producer = BatchProducer(cfg, policy, FixedOrder(tasks))
    ours: list[dict] = []

    def agentgym_iteration(i: int) -> None:
        w, c = time.perf_counter(), time.process_time()
        m = run_iteration(cfg, i, policy, optimizer, scheduler, producer, heads)
        ours.append({"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
                     "tokens": m["rollout"]["response_tokens"], "success": m["rollout"]["success_rate"],
                     "trained": m["train"]["tokens"], "sequences": m["train"]["samples"]})

    # --- TRL's GRPOTrainer with AgentGymRollout ------------------------------------------------
    rollout = AgentGymRollout(env_id, chat=CHAT, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens)
    theirs: list[dict] = []
    generated: list[tuple[int, int, int]] = []

    def counting(prompts, trainer):
        out = rollout(prompts, trainer)
        trained = sum(len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"]))
        generated.append((sum(sum(m) for m in out["env_mask"]), trained, len(out["prompt_ids"])))
        return out

    class Alternate(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.wall, self.cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, a, state, control, **kw):
            wall, cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
            trajs = rollout.last_trajectories
            tokens, trained, sequences = generated[-1]
            theirs.append({"wall": wall, "cpu": cpu, "tokens": tokens, "trained": trained, "sequences": sequences,
                           "success": sum(t.success for t in trajs) / max(len(trajs), 1)})
            agentgym_iteration(state.global_step - 1)  # not inside TRL's timed step

    config = grpo_config(output_dir=str(work / "trl"), num_generations=args.group, per_device_train_batch_size=batch,
                         gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1,
                         max_steps=args.iterations, learning_rate=args.lr, lr_scheduler_type="constant",
                         beta=0.0, epsilon=0.2, temperature=1.0, max_completion_length=1 << 14, use_cpu=True,
                         report_to=[], save_strategy="no", logging_steps=1, shuffle_dataset=False, seed=0,
                         disable_tqdm=True, log_level="error")
    trainer = grpo_trainer(str(model_dir), rollout, config, train_dataset=rollout.dataset(tasks=tasks),
                           callbacks=[Alternate()])
    trainer.rollout_func = counting
    trainer.train()

    def row(name, runs):
        runs = runs[1:] if len(runs) > 1 else runs
        wall = statistics.mean(r["wall"] for r in runs)
        cpu = statistics.mean(r["cpu"] for r in runs)
        tokens = statistics.mean(r["tokens"] for r in runs)
        success = statistics.mean(r["success"] for r in runs)
        trained = statistics.mean(r["trained"] for r in runs)
        sequences = statistics.mean(r["sequences"] for r in runs)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {tokens:.0f} | {tokens / wall:.1f} | {tokens / cpu:.1f} | "
              f"{sequences:.0f} | {trained:.0f} | {success:.2f} |")
        return wall, cpu, tokens / wall, tokens / cpu

    print(f"\n{env_id}, {args.tasks} tasks x {args.group} episodes per iteration, <= {args.max_turns} turns x "
          f"{args.max_new_tokens} tokens, {args.iterations} iterations (means over iterations 2..{args.iterations})\n")
    print("| trainer | s/iter (wall) | s/iter (CPU) | generated tokens/iter | tokens/s (wall) | tokens/s (CPU) | "
          "trained sequences/iter | trained tokens/iter | rollout success |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    t = row("TRL GRPOTrainer + AgentGymRollout", theirs)
    a = row("agentgym (grpo, sample_mode=full)", ours)
    print(f"\nratio TRL / agentgym: s/iter {t[0] / a[0]:.2f} (wall), {t[1] / a[1]:.2f} (CPU); "
          f"tokens/s {t[2] / a[2]:.2f} (wall), {t[3] / a[3]:.2f} (CPU)")


if __name__ == "__main__":
    main()
