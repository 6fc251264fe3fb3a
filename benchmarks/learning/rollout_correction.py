"""A mismatched rollout engine, trained with and without `ppo.rollout_correction`, over seeds.

Two engines, each the trainer's own HF model with a difference the correction sees:

* `--engine tempered` (`policy.engine=hf-tempered`): the logprobs it records for each sampled
  token are those of the distribution it sampled from, log softmax(z / T) at the sampling
  temperature T (as an engine reporting processed logprobs does), while the trainer's are the raw
  model's, log softmax(z). With rollout.temperature=1.2 every batch then comes from a policy
  mu = softmax(z / 1.2) the trainer does not compute: the PPO ratio of an uncorrected run starts
  away from 1 (against mu), a corrected run takes it against the trainer's own logprobs and weights
  each token by pi_old / mu (trainers/rollout_correction.py). Evaluation samples at
  eval.temperature=1.0, where the two agree.
* `--engine bf16` (`policy.engine=hf-bf16`): a bf16 copy of the trainer's weights samples and
  records its logprobs, as a bf16 inference engine does beside an fp32 trainer; the copy takes the
  trainer's weights again whenever they changed. Evaluation plays through the same engine.

One warm start for every arm and seed: --warm-start (a model folder, e.g. the household-tiny
preset's seed-0 SFT model, whose settings hash is recorded), or else the preset's tiny model and
SFT built in <work>/warm. Then one RL run per (arm, seed), one process, one thread. Per seed, the
paired difference d = success(tis_token) - success(none) of the final held-out evaluation; the
95% t-interval of d over the seeds. Resumable: a run whose folder holds its summary is read back,
not run again; an interrupted one resumes from its last checkpoint (every 3 iterations). Each
run's per-iteration mismatch metrics and per-task outcomes go to --out, with the command and the
code version:

    python benchmarks/learning/rollout_correction.py --engine bf16 --seeds 0,1,2 \\
        --warm-start runs/main_job/sft_model --work runs/rollout_correction_bf16 --out docs/rollout_correction_bf16.json
    python benchmarks/learning/rollout_correction.py --engine tempered --seeds 0,1,2 \\
        --warm-start runs/main_job/sft_model --work runs/rollout_correction --out docs/rollout_correction.json

Seed 0's run folder is <work>/<arm> (the layout of the first, one-seed version of this script),
seed s's <work>/<arm>-seed<s>.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import code_version, command, load_average, process_cpu_seconds  # noqa: E402
from benchmarks.learning.rollout_correction_smol import final_evaluation, t_interval  # noqa: E402

ARMS = {
    "none": ["ppo.rollout_correction.mode=none", "ppo.rollout_correction.measure=true"],
    "tis_token": ["ppo.rollout_correction.mode=tis", "ppo.rollout_correction.cap=2.0"],
    "icepop": ["ppo.rollout_correction.mode=icepop"],
}
ENGINES = {"tempered": "hf-tempered", "bf16": "hf-bf16"}
LOGGED = ("mismatch/", "train/clip_frac", "train/approx_kl", "train/ratio_max_first", "rollout/success_rate",
          "time/iteration_cpu_s")


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


class Bf16Rollouts:
    """The trainer's HFPolicy sampling from a bf16 copy of its weights: the sampled tokens and their
    recorded logprobs are the bf16 model's, the trainer's stay fp32. The copy takes the trainer's
    weights (rounded to bf16) whenever they changed since its last sync, and drops its cached
    conversation prefixes then, as every engine follows its trainer (agentgym.policies.engines)."""

    def __init__(self, trainer):
        import torch

        self.trainer = trainer
        self.copy = copy.copy(trainer)  # tokenizer, sampling generator and settings shared
        self.copy.model = copy.deepcopy(trainer.model).to(torch.bfloat16).eval().requires_grad_(False)
        self.copy.reference_model = None
        self.copy.frozen_states = None  # the update's recorded states are the trainer's own (LoRA only)
        self.copy._prefixes = {}
        self.synced_version = None

    def __getattr__(self, name):  # tokenizer, encode_prompt, eos_ids, forget, fork, sleep, close, ...
        return getattr(self.copy, name)

    def weights_version(self) -> int:
        return sum(int(p._version) for p in self.trainer.model.parameters())

    def sync(self, force: bool = False) -> float:
        import torch

        t0 = time.perf_counter()
        version = self.weights_version()
        if force or version != self.synced_version:
            with torch.no_grad():
                for mine, theirs in zip(self.copy.model.parameters(), self.trainer.model.parameters()):
                    mine.copy_(theirs)  # rounded to bf16
            self.copy.forget()
            self.synced_version = version
        return time.perf_counter() - t0

    def generate(self, prompts, sampling=None, contexts=None):
        return self.generate_ids([self.copy.encode_prompt(m) for m in prompts], sampling)

    def generate_ids(self, prompt_ids, sampling=None, cache_keys=None, **kwargs):
        self.sync()
        return self.copy.generate_ids(prompt_ids, sampling, cache_keys=cache_keys, **kwargs)


def register() -> None:
    from agentgym.policies.engines import register_engine

    register_engine("hf-tempered", lambda trainer, _path, _settings: TemperedLogprobs(trainer))
    register_engine("hf-bf16", lambda trainer, _path, _settings: Bf16Rollouts(trainer))


def warm_start_record(path: Path) -> dict:
    """What identifies a warm-start folder: its settings hash (agentgym_settings.json) and weights."""
    settings = path / "agentgym_settings.json"
    return {"path": path.as_posix(),
            "settings_hash": json.loads(settings.read_text())["hash"] if settings.is_file() else None,
            "weights_sha256": hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()[:16]}


def run_record(run_dir: Path, summary: dict) -> dict:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {"heldout_before": summary["heldout_success_before"], "heldout_after": summary["heldout_success_after"],
            "heldout_gain": summary["heldout_gain"], "heldout_gain_ci": summary["heldout_gain_ci"],
            "iterations": summary["iterations"],
            "per_iteration": [{k: v for k, v in m.items() if k.startswith(LOGGED)}
                              for m in lines if "rollout/success_rate" in m],
            "per_task_success": final_evaluation(run_dir)}


def summarize(runs: dict, arms: list[str], seeds: list[int]) -> dict:
    """Per arm the final success per seed; per seed d = tis_token - none over the same tasks, its
    mean and 95% t-interval over seeds; the mismatch KL (mean token KL per iteration) over all runs."""
    out: dict = {}
    for arm in arms:
        done = [runs[f"{arm}/seed{s}"] for s in seeds if f"{arm}/seed{s}" in runs]
        ratios = [m["train/ratio_max_first_minibatch"] for r in done for m in r["per_iteration"]
                  if "train/ratio_max_first_minibatch" in m]
        out[arm] = {"seeds": [s for s in seeds if f"{arm}/seed{s}" in runs],
                    "heldout_before": [r["heldout_before"] for r in done],
                    "heldout_after": [r["heldout_after"] for r in done],
                    "first_minibatch_ratio_max": max(ratios) if ratios else None}
    paired = [s for s in seeds if f"tis_token/seed{s}" in runs and f"none/seed{s}" in runs]
    diffs = []
    for s in paired:
        tis, none = runs[f"tis_token/seed{s}"]["per_task_success"], runs[f"none/seed{s}"]["per_task_success"]
        diffs.append(sum(tis[t] - none[t] for t in none) / len(none))
    out["tis_token_minus_none"] = {"seeds": paired, "per_seed": diffs,
                                   "mean": sum(diffs) / len(diffs) if diffs else None,
                                   "t_interval_95": t_interval(diffs)}
    kls = [m["mismatch/kl_mean"] for r in runs.values() for m in r["per_iteration"] if "mismatch/kl_mean" in m]
    out["mismatch_kl_mean"] = {"mean": sum(kls) / len(kls), "min": min(kls), "max": max(kls)} if kls else None
    return out


def check_same_setup(record: dict, out: Path) -> None:
    """Refuse, in one line, to add runs to a results file whose runs were made with other settings
    (the seeds and arms asked for may differ; every other setting must not)."""
    previous, setup = record.pop("previous_setup", None), record["setup"]
    if not previous or not record.get("runs"):
        return
    changed = sorted(k for k in {*previous, *setup} - {"seeds", "arms"}
                     if json.dumps(previous.get(k), sort_keys=True) != json.dumps(setup.get(k), sort_keys=True))
    if changed:
        raise SystemExit(f"{out} holds runs made with other settings ({', '.join(changed)}): "
                         "move it away, or run with its settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=ENGINES, default="tempered")
    parser.add_argument("--out", default="docs/rollout_correction.json")
    parser.add_argument("--work", default="runs/rollout_correction")
    parser.add_argument("--warm-start", default=None, help="a model folder every run starts from (else built)")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--temperature", type=float, default=1.2, help="rollout temperature (--engine tempered)")
    parser.add_argument("--eval-tasks", type=int, default=234)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--arms", default="none,tis_token")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (key=value)")
    args = parser.parse_args()
    arms, seeds = args.arms.split(","), [int(s) for s in args.seeds.split(",")]
    if unknown := [a for a in arms if a not in ARMS]:
        raise SystemExit(f"--arms: unknown {unknown}; choose from {', '.join(ARMS)}")

    register()
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import prepare_start_model
    from agentgym.trainers.threads import set_torch_threads
    from agentgym.trainers.training import train

    set_torch_threads(1, print)
    work, out = Path(args.work), Path(args.out)
    common = ["torch_threads=1", "log.tensorboard=false", "log.plot=false", "log.save_trajectories_every=0",
              "checkpoint_every=3", "time_budget_s=null", *args.overrides]
    if args.warm_start:
        start_model, warm = Path(args.warm_start), warm_start_record(Path(args.warm_start))
    else:  # the preset's tiny model and SFT at seed 0, reused while its settings hash matches
        warm_cfg = load_config("household-tiny", common + ["seed=0", "name=warm", f"run_dir={work}/warm",
                                                           "iterations=0"])
        (work / "warm").mkdir(parents=True, exist_ok=True)
        start_model, _ = prepare_start_model(warm_cfg, work / "warm", print)
        warm = warm_start_record(Path(start_model))
    engine = ["policy.engine=" + ENGINES[args.engine]]
    if args.engine == "tempered":
        engine.append(f"rollout.temperature={args.temperature}")
    file = json.loads(out.read_text()) if out.is_file() else {}
    record = file.setdefault("over_seeds", {})
    record.update({"command": command(__file__, sys.argv[1:]), "previous_setup": record.get("setup"),
                   "setup": {"preset": "household-tiny", "warm_start": warm, "engine": ENGINES[args.engine],
                             "engine_overrides": engine, "common_overrides": common, "arms": {a: ARMS[a] for a in arms},
                             "seeds": seeds, "iterations": args.iterations, "eval_tasks": args.eval_tasks,
                             "eval_episodes_per_task": args.eval_episodes, "eval_temperature": 1.0,
                             "paired_difference": "per seed, tis_token - none over the same held-out tasks; "
                                                  "95% t-interval over seeds (df = seeds - 1)"}})
    check_same_setup(record, out)
    runs = record.setdefault("runs", {})
    for seed in seeds:
        for arm in arms:
            name = f"{arm}/seed{seed}"
            run_dir = work / (arm if seed == 0 else f"{arm}-seed{seed}")
            done = run_dir / "summary.json"
            if name in runs:
                continue
            cpu0, t0, version = process_cpu_seconds(), time.perf_counter(), code_version()  # as the run starts
            if done.is_file() and json.loads(done.read_text()).get("iterations") == args.iterations:
                entry = {**run_record(run_dir, json.loads(done.read_text())), "read_from_run_folder": True}
            else:
                cfg = load_config("household-tiny", common + ARMS[arm] + engine + [
                    f"seed={seed}", f"name=rc-{args.engine}-{arm}-s{seed}", f"run_dir={run_dir}",
                    f"policy.model={start_model}", "tiny.build=false", "sft.enabled=false",
                    f"iterations={args.iterations}", f"eval.num_tasks={args.eval_tasks}",
                    f"eval.episodes_per_task={args.eval_episodes}"])  # eval.temperature: the preset's 1.0
                summary = train(cfg, resume=True, overwrite=True)  # from its last checkpoint, if interrupted
                entry = {**run_record(run_dir, summary), "code_version": version,
                         "cpu_s": round(process_cpu_seconds() - cpu0, 1),
                         "wall_s": round(time.perf_counter() - t0, 1), "load_1min": load_average()}
            runs[name] = {"run_dir": run_dir.as_posix(), **entry}
            record["summary"] = summarize(runs, arms, seeds)
            out.write_text(json.dumps(file, indent=1) + "\n")
            print(f"{name}: {entry['heldout_before']:.3f} -> {entry['heldout_after']:.3f}", flush=True)
    record["summary"] = summarize(runs, arms, seeds)  # also when every run was there already
    record["code_versions"] = list(dict.fromkeys(r["code_version"] for r in runs.values() if r.get("code_version")))
    if set(file) <= {"over_seeds", "code_version"}:  # a file of this script's alone: its versions at the top too
        file["code_version"] = ", ".join(record["code_versions"])
    out.write_text(json.dumps(file, indent=1) + "\n")
    print(json.dumps(record["summary"], indent=1), flush=True)


if __name__ == "__main__":
    main()
