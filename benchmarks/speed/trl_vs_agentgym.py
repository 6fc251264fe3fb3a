"""TRL's GRPOTrainer (through agentgym.integrations.trl) vs agentgym's own trainer, in one run.

Both train the same tiny model (two copies of the same weights) with GRPO on the same tasks of
the same env, in the same order: `--tasks` tasks per iteration, `--group` episodes per task,
at most `--max-turns` turns of at most `--max-new-tokens` tokens, chat history "full", one
optimizer step per iteration over the whole batch, no KL, clip 0.2, the same learning rate.
agentgym trains one sequence per episode (`ppo.sample_mode=full`), as TRL must.

The two trainers alternate iteration by iteration (a TRL step, then an agentgym iteration,
run from a callback at the end of TRL's step), so a shared machine's load falls on both alike.
Both start from the same warm start (the main job's tiny model after SFT on a searching expert's
episodes of the same task categories, `warm_start`), so rollouts succeed about half the time and
both trainers really train: rollout success and the loss are printed for each.

Printed per trainer: seconds per iteration (wall clock and this process's CPU time), where they
go (rollout vs the rest), generated (model) tokens per iteration, the sequences and tokens each
trainer runs its update on, trained tokens per second, and `speedup` = TRL s/iter / agentgym's.
Both trainers play their episodes with agentgym's rollout engine (the adapter is ours), so the
engine's gains (token in / token out, KV reuse across turns) count for both; the difference is
in the update. The first iteration of each (warm-up) is left out of the means. Written to
docs/trl_vs_agentgym.json (`--out`), keeping what other scripts wrote there
(benchmarks/speed/main_job_speed.py adds main_job_cpu_s_per_iter_ratio).

Usage: python benchmarks/speed/trl_vs_agentgym.py [--iterations 6] [--tasks 4] [--group 4] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402

import agentgym  # noqa: E402

# One growing conversation (TRL trains one sequence per episode); the reply is the bare command and
# there is no system prompt, as in the main job: a 2-layer model learns that layout from a short SFT.
CHAT = {"history": "full", "parser": "raw", "system_prompt": "", "show_admissible": True}
CATEGORIES = ["pick_and_place/easy", "look_at_obj_in_light/easy"]  # short tasks: a warm start solves some
TINY = {"vocab_size": 1000, "hidden": 256, "layers": 2, "heads": 8}  # the main job's tiny model
SFT = {"sft.epochs": 4, "sft.lr": 1e-3, "sft.batch_size": 8, "sft.expert": "searching", "env.fresh_tasks": 4000}
# --model's warm start: a LoRA (r=16, all linears) SFT merged into the weights, since a full fine-tune
# of a 135M model at the tiny model's lr would wreck it. (Its earlier failures, "go" replies at lr 1e-3
# and a loss stuck near 0.9 at 3e-4, were one bf16 autocast around the whole SFT: autocast keeps its
# bf16 copy of a trained weight until the context exits, so every step computed with LoRA's B = 0.)
MODEL_SFT = {**SFT, "sft.epochs": 3, "sft.lr": 3e-4, "sft.batch_size": 2}


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
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--max-turns", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--sft-tasks", type=int, default=1000,
                    help="demonstrated episodes of the warm start (of --model too; 0: --model as it is)")
    ap.add_argument("--warm-dir", default="runs/trl_vs_agentgym/warm",
                    help="where the warm start is kept (reused when its settings match)")
    ap.add_argument("--out", default="docs/trl_vs_agentgym.json")
    ap.add_argument("--warm-only", action="store_true", help="build (or check) the warm start and stop")
    ap.add_argument("--raw", default=None, help="also write each iteration's records here as they land")
    ap.add_argument("--lora", type=int, default=None,
                    help="LoRA rank of both arms (0: full fine-tuning); default 16 with --model, 0 for the tiny model")
    ap.add_argument("--lora-top-layers", type=int, default=None,
                    help="both arms' LoRA on the last K decoder layers only (policy.lora.top_layers; PEFT's "
                         "layers_to_transform for TRL); default: every layer")
    ap.add_argument("--quick", action="store_true", help="3 iterations of 2 tasks x 2 episodes")
    args = ap.parse_args()
    if args.quick:
        args.iterations, args.tasks, args.group = 3, 2, 2
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.lora is None:
        args.lora = 16 if args.model else 0

    from transformers import TrainerCallback

    # agentgym's TRL module first: it silences the vLLM-version warnings importing trl prints
    from agentgym.integrations.trl import AgentGymRollout, grpo_config, grpo_trainer
    from trl import GRPOConfig  # noqa: F401  (checked import: the trl extra)

    from agentgym.trainers.config import load_config
    from agentgym.trainers.batches import BatchProducer
    from agentgym.trainers.training import frozen_states_for, run_iteration
    from agentgym.trainers.run_setup import build_heads, make_optimizer, make_policy
    from agentgym.trainers.precision import bf16_rollout, cpu_has_bf16

    env_id = agentgym.registration.check_env_id(args.env)
    work = Path(tempfile.mkdtemp(prefix="trl_vs_agentgym_"))
    space = agentgym.get_task_space(env_id)
    categories = CATEGORIES if env_id == "agentgym/Household-v0" else None
    # the warm start: SFT of --model (or of a tiny model built for the env) on --sft-tasks expert
    # episodes, kept in --warm-dir; --sft-tasks 0 trains --model as it is
    model_dir = args.model if args.model and args.sft_tasks == 0 else warm_start(env_id, work, categories, args)
    if args.warm_only:
        return
    tasks = [t for t in space.split("train") if categories is None or space.category(t) in categories]
    tasks = tasks[len(tasks) // 2:][: args.iterations * args.tasks]  # not the warm start's first half
    batch = args.tasks * args.group

    # --- agentgym's trainer, driven iteration by iteration --------------------------------------
    top = f", top_layers: {args.lora_top_layers}" if args.lora_top_layers else ""
    cfg = load_config({"env": {"chat": dict(CHAT)}}, [
        f"env.id={env_id}", f"policy.model={model_dir}", f"run_dir={work}/agentgym", f"iterations={args.iterations}",
        f"rollout.tasks_per_iter={args.tasks}", f"rollout.group_size={args.group}",
        f"rollout.max_new_tokens={args.max_new_tokens}", f"env.max_turns={args.max_turns}", "estimator.name=grpo",
        "ppo.sample_mode=full", "ppo.epochs=1", f"ppo.minibatch_size={batch}", "ppo.micro_batch_size=4",
        "ppo.micro_batch_tokens=1024",  # our best setting on a CPU (same gradient): 1-2 episodes per pass
        f"ppo.lr={args.lr}", "ppo.clip_eps=0.2", "ppo.kl_coef=0.0", "eval.every=0", "log.plot=false",
        "log.tensorboard=false", "torch_threads=1",
        # our best CPU setting on a real model: LoRA with its frozen base in bf16, rollout and update alike
        *([f"policy.lora={{r: {args.lora}{top}}}"] if args.lora else []),
        *(["ppo.matmul_dtype=bf16"] if args.model and cpu_has_bf16() else []),
    ])
    policy = make_policy(cfg.policy, model_dir)
    note = bf16_rollout(cfg.ppo.matmul_dtype, policy, cfg.policy.engine)
    if note:
        print(note)
    heads = build_heads(cfg.estimator, policy)
    optimizer, scheduler = make_optimizer(cfg.ppo, policy, heads)
    producer = BatchProducer(cfg, policy, FixedOrder(tasks))
    if (store := frozen_states_for(cfg.ppo, cfg.policy.engine, policy, producer, heads)) is not None:  # as `agentgym train` does
        print(f"agentgym: the update starts at layer {store.layer} from the rollout's frozen-layer outputs")
    ours: list[dict] = []

    phases = Phases()
    phases.watch(policy.model)

    def agentgym_iteration(i: int) -> None:
        w, c = time.perf_counter(), time.process_time()
        before = phases.snapshot()
        m = run_iteration(cfg, i, policy, optimizer, scheduler, producer, heads)
        ours.append({"wall": time.perf_counter() - w, "cpu": time.process_time() - c, **phases.since(before),
                     "rollout_wall": m["time"]["rollout_s"], "rollout_cpu": m["time"]["rollout_cpu_s"],
                     "tokens": m["rollout"]["response_tokens"],
                     "success": m["rollout"]["success_rate"], "trained": m["train"]["tokens"],
                     "sequences": m["train"]["samples"], "loss": m["train"].get("pg_loss", 0.0),
                     "frozen_states_samples": m["train"].get("frozen_states_samples", 0)})

    # --- TRL's GRPOTrainer with AgentGymRollout ------------------------------------------------
    rollout = AgentGymRollout(env_id, chat=CHAT, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens)
    theirs: list[dict] = []
    generated: list[tuple[int, int, int]] = []

    def counting(prompts, trainer):
        t, c = time.perf_counter(), time.process_time()
        out = rollout(prompts, trainer)
        trained = sum(len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"]))
        generated.append((sum(sum(m) for m in out["env_mask"]), trained, len(out["prompt_ids"]),
                          time.perf_counter() - t, time.process_time() - c))
        return out

    losses: list[float] = []

    class Alternate(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.wall, self.cpu = time.perf_counter(), time.process_time()
            self.phases = phases.snapshot()

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

        def on_step_end(self, a, state, control, **kw):
            wall, cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
            trajs = rollout.last_trajectories
            tokens, trained, sequences, rollout_wall, rollout_cpu = generated[-1]
            theirs.append({"wall": wall, "cpu": cpu, "rollout_wall": rollout_wall, "rollout_cpu": rollout_cpu,
                           **phases.since(self.phases),
                           "tokens": tokens, "trained": trained,
                           "sequences": sequences, "success": sum(t.success for t in trajs) / max(len(trajs), 1)})
            agentgym_iteration(state.global_step - 1)  # not inside TRL's timed step
            if args.raw:  # a long run's records survive a crash
                Path(args.raw).write_text(json.dumps({"trl": theirs, "agentgym": ours, "trl_losses": losses}))

    config = grpo_config(output_dir=str(work / "trl"), num_generations=args.group, per_device_train_batch_size=batch,
                         gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1,
                         max_steps=args.iterations, learning_rate=args.lr, lr_scheduler_type="constant",
                         beta=0.0, epsilon=0.2, temperature=1.0, max_completion_length=1 << 14, use_cpu=True,
                         report_to=[], save_strategy="no", logging_steps=1, shuffle_dataset=False, seed=0,
                         disable_tqdm=True, log_level="error",
                         # TRL's default (True) recomputes every forward in the backward to save memory; a CPU
                         # has the memory for these models, so off is TRL's faster setting here
                         gradient_checkpointing=False)
    peft = {}
    if args.lora:  # what a TRL user trains a real model on a CPU with: PEFT's LoRA, the same rank and modules as ours
        from peft import LoraConfig

        from agentgym.policies.hf import DEFAULT_LORA

        lora = {**DEFAULT_LORA, "r": args.lora}
        if args.lora_top_layers:  # the same layers as ours: PEFT's layers_to_transform with the modules spelled out
            from transformers import AutoModelForCausalLM

            from agentgym.policies.hf import lora_settings

            lora = lora_settings(AutoModelForCausalLM.from_pretrained(str(model_dir)),
                                 {**lora, "top_layers": args.lora_top_layers})
        peft = {"peft_config": LoraConfig(task_type="CAUSAL_LM", **lora)}
    trainer = grpo_trainer(str(model_dir), rollout, config, train_dataset=rollout.dataset(tasks=tasks),
                           callbacks=[Alternate()], **peft)
    trainer.rollout_func = counting
    phases.watch(trainer.model)
    print(f"TRL: mixed precision {trainer.accelerator.mixed_precision}, model dtype {trainer.model.dtype}, "
          f"{sum(p.numel() for p in trainer.model.parameters() if p.requires_grad) / 1e6:.2f}M trained parameters")
    trainer.train()

    for r, loss in zip(theirs, losses):  # TRL logs the step's loss after on_step_end
        r["loss"] = loss

    def row(name, runs) -> dict:
        runs = runs[1:] if len(runs) > 1 else runs
        mean = {k: statistics.mean(r.get(k, 0.0) for r in runs) for k in runs[0]}
        out = {"s_per_iter": mean["wall"], "cpu_s_per_iter": mean["cpu"], "rollout_s_per_iter": mean["rollout_wall"],
               "update_and_rest_s_per_iter": mean["wall"] - mean["rollout_wall"],
               "rollout_cpu_s_per_iter": mean["rollout_cpu"],
               "update_and_rest_cpu_s_per_iter": mean["cpu"] - mean["rollout_cpu"],
               "generated_tokens_per_iter": mean["tokens"], "trained_sequences_per_iter": mean["sequences"],
               "trained_tokens_per_iter": mean["trained"], "trained_tokens_per_s": mean["trained"] / mean["wall"],
               "rollout_success": mean["success"], "loss_per_iter": [r.get("loss", 0.0) for r in runs],
               "success_per_iter": [r["success"] for r in runs], "cpu_s_per_iter_all": [r["cpu"] for r in runs],
               "iterations_measured": len(runs),
               # samples whose update started from the rollout's frozen-layer outputs (LoRA on the top layers)
               **({"frozen_states_samples_per_iter": mean["frozen_states_samples"]} if "frozen_states_samples" in mean
                  else {}),
               # CPU s per iteration by phase: the rollout, no-grad scoring forwards outside it, the backward
               # passes, the optimizer steps, and the rest (the update's forward, loss, collate, bookkeeping)
               "phases_cpu_s": {"rollout": mean["rollout_cpu"], "scoring_forward": mean["scoring_cpu"],
                                "backward": mean["backward_cpu"], "optimizer_step": mean["optimizer_cpu"],
                                "update_forward_and_rest": mean["cpu"] - mean["rollout_cpu"] - mean["scoring_cpu"]
                                - mean["backward_cpu"] - mean["optimizer_cpu"]}}
        print(f"  {name}, CPU s per iteration by phase: "
              + ", ".join(f"{k} {v:.1f}" for k, v in out["phases_cpu_s"].items()))
        print(f"| {name} | {out['s_per_iter']:.2f} | {out['cpu_s_per_iter']:.2f} | {out['rollout_s_per_iter']:.2f} | "
              f"{mean['tokens']:.0f} | {mean['sequences']:.0f} | {mean['trained']:.0f} | "
              f"{out['trained_tokens_per_s']:.0f} | {mean['success']:.2f} | "
              f"{', '.join(f'{x:+.3f}' for x in out['loss_per_iter'])} |")
        return out

    print(f"\n{env_id}, {args.tasks} tasks x {args.group} episodes per iteration, <= {args.max_turns} turns x "
          f"{args.max_new_tokens} tokens, {args.iterations} iterations (means over iterations 2..{args.iterations})\n")
    print("| trainer | s/iter (wall) | s/iter (CPU) | rollout s/iter | generated tokens/iter | trained sequences/iter | "
          "trained tokens/iter | trained tokens/s | rollout success | loss per iteration |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    trl = row("TRL GRPOTrainer + AgentGymRollout", theirs)
    ours_row = row("agentgym (grpo, sample_mode=full)", ours)
    speedup = trl["s_per_iter"] / ours_row["s_per_iter"]
    print(f"\nspeedup = TRL s/iter / agentgym s/iter: {speedup:.2f} (wall), "
          f"{trl['cpu_s_per_iter'] / ours_row['cpu_s_per_iter']:.2f} (CPU)")
    out_path = Path(args.out)
    report = json.loads(out_path.read_text()) if out_path.is_file() else {}
    entry = {
        "command": "OMP_NUM_THREADS=1 python " + " ".join(sys.argv),
        "setting": {"env": env_id, "categories": categories, "tasks_per_iter": args.tasks, "group": args.group,
                    "max_turns": args.max_turns, "max_new_tokens": args.max_new_tokens, "iterations": args.iterations,
                    "warm_start_sft_tasks": args.sft_tasks, "lr": args.lr, "lora_r": args.lora,
                    "lora_top_layers": args.lora_top_layers,
                    "agentgym_matmul_dtype": cfg.ppo.matmul_dtype,
                    "trl_mixed_precision": str(trainer.accelerator.mixed_precision)},
        "trl": trl, "agentgym": ours_row, "speedup": speedup,
        "speedup_cpu": trl["cpu_s_per_iter"] / ours_row["cpu_s_per_iter"],
    }
    # the real model's entry beside the tiny model's (the top level)
    # (LoRA on the top layers only is a setting of its own, kept beside the every-layer one)
    key = "real_model" + (f"_lora_top_{args.lora_top_layers}_layers" if args.lora_top_layers else "")
    report.update({key: {"model": args.model, **entry}} if args.model else entry)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2))
    print(f"written: {out_path}")


class Phases:
    """CPU and wall seconds, accumulated over the process, of backward passes (torch.autograd.backward,
    patched here), optimizer steps (torch's global optimizer hooks) and no-grad forwards of the
    watched models outside a rollout (scoring: a rollout samples in inference mode); each arm reads
    what accrued during its own iteration (`since`), the arms running one after the other."""

    def __init__(self):
        self.cpu = {"backward": 0.0, "optimizer": 0.0, "scoring": 0.0}
        real_backward = torch.autograd.backward

        def backward(*a, **kw):
            c = time.process_time()
            try:
                return real_backward(*a, **kw)
            finally:
                self.cpu["backward"] += time.process_time() - c

        torch.autograd.backward = backward
        self._step = []
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(lambda *_: self._step.append(time.process_time()))
        register_optimizer_step_post_hook(
            lambda *_: self._add("optimizer", self._step.pop()) if self._step else None)

    def _add(self, phase: str, start: float) -> None:
        self.cpu[phase] += time.process_time() - start

    def watch(self, model) -> None:
        starts = []

        def scoring() -> bool:
            return not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()

        model.register_forward_pre_hook(lambda *_: starts.append(time.process_time()) if scoring() else None)
        model.register_forward_hook(lambda *_: self._add("scoring", starts.pop()) if scoring() and starts else None)

    def snapshot(self) -> dict:
        return dict(self.cpu)

    def since(self, before: dict) -> dict:
        return {f"{k}_cpu": v - before[k] for k, v in self.cpu.items()}


def warm_start(env_id: str, work: Path, categories, args) -> Path:
    """--model, or the main job's tiny model (2 layers, hidden 256), after SFT on a searching expert's episodes
    played with history "full", one sequence per episode, on fresh generated tasks (the train split
    holds only 224 of these categories): 1,000 episodes x 4 epochs reach 0.48 rollout success at
    temperature 1 (300 split tasks x 3 epochs: 0.02, 75% invalid actions). Kept in --warm-dir and
    reused while its settings match."""
    import json

    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts
    from agentgym.trainers.config import load_config
    from agentgym.trainers.precision import cpu_has_bf16
    from agentgym.trainers.sft import run_sft

    sft = MODEL_SFT if args.model else SFT
    settings = {"env": env_id, "categories": categories, "chat": CHAT, "sft_tasks": args.sft_tasks,
                "sft": sft, "max_turns": args.max_turns}
    settings.update({"model": str(Path(args.model).resolve()), "lora": True} if args.model else {"tiny": TINY})
    out = Path(args.warm_dir)
    marker = out / "warm_start_settings.json"
    if marker.is_file() and json.loads(marker.read_text()) == settings:
        print(f"warm start reused: {out}")
        return out
    t, c = time.perf_counter(), time.process_time()
    tiny_dir = args.model or build_tiny_model(work / "tiny", env_id=env_id,
                                              texts=collect_env_texts(env_id, num_tasks=64, chat=CHAT), **TINY)
    cfg = load_config({"env": {"chat": dict(CHAT), "categories": categories}}, [
        f"env.id={env_id}", f"policy.model={tiny_dir}", "tiny.build=false", f"sft.num_tasks={args.sft_tasks}",
        *[f"{k}={v}" for k, v in sft.items()], "seed=0", f"env.max_turns={args.max_turns}",
        f"sft.matmul_dtype={'bf16' if args.model and cpu_has_bf16() else 'fp32'}"])
    policy = HFPolicy(tiny_dir, lora={} if args.model else None)
    # bf16 matrix multiplies where the CPU has them natively (the SFT is the costly part of a --model run),
    # a fresh autocast per step (run_sft): one context around it all trained nothing (LoRA's B stayed 0)
    stats = run_sft(policy, cfg.sft, cfg.env, cfg.seed)
    print(f"warm start: SFT on {stats['trajectories']} expert episodes, loss {stats['first_loss']:.3f} -> "
          f"{stats['final_loss']:.3f}, {time.perf_counter() - t:.0f}s wall, {time.process_time() - c:.0f}s CPU")
    if args.model:  # the adapter merged in: both arms then start from a plain model folder
        policy.model = policy.model.merge_and_unload()
    policy.save(out)
    marker.write_text(json.dumps(settings))
    return out


if __name__ == "__main__":
    main()
