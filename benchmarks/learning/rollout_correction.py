"""A perturbed rollout policy, trained with and without `ppo.rollout_correction`.

The engine of this benchmark (`policy.engine=hf-tempered`) is the trainer's own HF model, but the
logprobs it records for each sampled token are those of the distribution it sampled from,
log softmax(z / T) at the sampling temperature T (as an engine reporting processed logprobs does),
while the trainer's are the raw model's, log softmax(z). With rollout.temperature=1.2 every batch
then comes from a policy mu = softmax(z / 1.2) the trainer does not compute: the PPO ratio of an
uncorrected run starts away from 1 (against mu), a corrected run takes it against the trainer's own
logprobs and weights each token by pi_old / mu (trainers/rollout_correction.py). Evaluation samples
at eval.temperature=1.0 from the trained model, where the two agree.

One warm start (the household-tiny preset's tiny model and SFT), then one short RL run per arm from
it, one seed, one process, one thread; the per-iteration mismatch metrics and the held-out success
before and after go to --out:

    python benchmarks/learning/rollout_correction.py --out docs/rollout_correction.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

ARMS = {
    "none": ["ppo.rollout_correction.mode=none", "ppo.rollout_correction.measure=true"],
    "tis_token": ["ppo.rollout_correction.mode=tis", "ppo.rollout_correction.cap=2.0"],
    "icepop": ["ppo.rollout_correction.mode=icepop"],
}


class TemperedLogprobs:
    """The trainer's HFPolicy as a rollout engine whose recorded logprobs are at the sampling
    temperature: log softmax(logits / T)[token] (raw logprobs where T is 0 or 1)."""

    def __init__(self, trainer):
        self.trainer = trainer

    def __getattr__(self, name):  # tokenizer, encode_prompt, sync, sleep, close, reseed, ...
        return getattr(self.trainer, name)

    def generate(self, prompts, sampling=None, contexts=None):
        return self.generate_ids([self.trainer.encode_prompt(m) for m in prompts], sampling)

    def generate_ids(self, prompt_ids, sampling=None, cache_keys=None, allowed_replies=None, **kwargs):
        import torch

        if allowed_replies is not None:
            raise SystemExit("hf-tempered records free decoding's logprobs: turn rollout.admissible_only off")
        out = self.trainer.generate_ids(prompt_ids, sampling, cache_keys=cache_keys, **kwargs)
        temperature = sampling.temperature if sampling is not None else 1.0
        if temperature in (0.0, 1.0):
            return out
        model = self.trainer.model
        with torch.inference_mode():
            for c in out:
                if not c.response_ids:
                    continue
                ids = torch.tensor([list(c.prompt_ids) + list(c.response_ids)], device=self.trainer.device)
                logits = model(input_ids=ids).logits[0, len(c.prompt_ids) - 1:-1].float()
                logp = torch.log_softmax(logits / temperature, -1)
                c.response_logprobs = logp.gather(-1, ids[0, len(c.prompt_ids):, None])[:, 0].tolist()
        return out


def register() -> None:
    from agentgym.policies.engines import register_engine

    register_engine("hf-tempered", lambda trainer, _path, _settings: TemperedLogprobs(trainer))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/rollout_correction.json")
    parser.add_argument("--work", default="runs/rollout_correction")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--temperature", type=float, default=1.2)
    parser.add_argument("--eval-tasks", type=int, default=234)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    register()
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import prepare_start_model
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import train

    set_torch_threads(1, print)
    work = Path(args.work)
    common = [f"seed={args.seed}", "torch_threads=1", "log.tensorboard=false", "log.plot=false",
              "log.save_trajectories_every=0", "checkpoint_every=0", "time_budget_s=null"]
    warm_cfg = load_config("household-tiny", common + ["name=warm", f"run_dir={work}/warm", "iterations=0"])
    started = time.perf_counter()
    warm_dir = Path(work / "warm")
    warm_dir.mkdir(parents=True, exist_ok=True)
    start_model, _ = prepare_start_model(warm_cfg, warm_dir, print)
    warm_s = time.perf_counter() - started
    record = {"command": command(__file__, sys.argv[1:]),
              "setup": {"preset": "household-tiny", "warm_start": "the preset's tiny model and SFT (seed "
                        f"{args.seed})", "engine": "hf-tempered (logprobs at the sampling temperature)",
                        "rollout_temperature": args.temperature, "trainer_temperature": 1.0,
                        "iterations": args.iterations, "eval_tasks": args.eval_tasks,
                        "eval_episodes_per_task": args.eval_episodes, "eval_temperature": 1.0,
                        "warm_start_s": warm_s}, "arms": {}}
    for arm in args.arms.split(","):
        run_dir = work / arm
        cfg = load_config("household-tiny", common + ARMS[arm] + [
            f"name=rc-{arm}", f"run_dir={run_dir}", f"policy.model={start_model}", "tiny.build=false",
            "sft.enabled=false", f"iterations={args.iterations}", "policy.engine=hf-tempered",
            f"rollout.temperature={args.temperature}", f"eval.num_tasks={args.eval_tasks}",
            f"eval.episodes_per_task={args.eval_episodes}"])
        t0 = time.perf_counter()
        summary = train(cfg, overwrite=True)
        lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
        per_iter = [{k: v for k, v in m.items() if k.startswith(("mismatch/", "train/clip_frac", "train/approx_kl",
                                                                "train/ratio_max_first", "rollout/success_rate"))}
                    for m in lines if "rollout/success_rate" in m]
        record["arms"][arm] = {"overrides": ARMS[arm], "heldout_before": summary["heldout_success_before"],
                               "heldout_after": summary["heldout_success_after"],
                               "heldout_gain": summary["heldout_gain"], "heldout_gain_ci": summary["heldout_gain_ci"],
                               "wall_s": time.perf_counter() - t0, "per_iteration": per_iter}
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"{arm}: {summary['heldout_success_before']:.3f} -> {summary['heldout_success_after']:.3f}", flush=True)


if __name__ == "__main__":
    main()
