"""Long experiments as a table of resumable runs (issue 35): what the learning benchmarks share
(benchmarks/learning: rl_vs_baselines.py, verdict.py, estimators_llm.py, real_llm_rl.py, ...).

A benchmark lists its runs as `Job`s: a key such as "rl/seed3" (also its folder under the run
root) and the keys it waits for. `run_jobs` starts each pending job as a process of its own
(`python SCRIPT --job KEY ...`), at most `parallel` at a time with one torch thread each, and
records what a finished job wrote (its `result.json`) in the done-table, a JSON file only this
process writes (atomically: a killed scheduler never leaves half a table). Run the script again:
jobs in the table are skipped; unfinished ones start again and resume from their own checkpoints
(the trainer's `resume=True`, or `sft_steps`'s checkpoints below). A job that fails is reported
with its log and its dependents wait; the others go on. Stopping the scheduler (Ctrl-C, `kill PID`)
stops its workers; each worker holds a lock on its folder, so a job never runs twice at once.

Also here, because every arm needs them: the SFT update that checkpoints and resumes bit for bit
(`sft_steps`), the validation tasks (fresh tasks that are neither train nor held-out), evaluation
of a policy on a named split, the compute of a finished RL run (optimizer steps, tokens), and the
jobs of an equal-compute comparison (`ArmJob`: which run an imitation arm matches, what a job is
evaluated on, its final model's evaluation).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

RESULT_FILE = "result.json"
VALIDATION_SEED = 35_000_035  # the generator seed of the validation draw (never a training seed)


# --- the done-table and the scheduler -------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    key: str  # "arm/seedN": unique, and the job's folder under the run root
    after: tuple[str, ...] = ()  # keys that must be done first


def write_json(path: Path, data) -> None:
    """Write atomically: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=float))
    os.replace(tmp, path)


def write_json_key(path: Path, key: str, data) -> None:
    """Set one top-level key of the JSON file at `path` (read, modify, write atomically), keeping the
    keys other benchmarks write there (docs/real_llm.json holds the zero-shot rows and the RL table)."""
    path = Path(path)
    whole = json.loads(path.read_text()) if path.is_file() else {}
    whole[key] = data
    write_json(path, whole)


def write_results_key(path: Path, key: str, data: dict, derived=None) -> None:
    """Set one top-level entry of a results file that holds several (a setting, a seed), and at its top
    `code_version`: every entry's code versions, so a file whose figures the docs quote names them.
    `derived(whole) -> {key: entry}`: entries computed from all the others (a summary over seeds),
    recomputed on every write so that they never fall behind."""
    path = Path(path)
    whole = json.loads(path.read_text()) if path.is_file() else {}
    whole[key] = data
    if derived is not None:
        whole.update(derived(whole))
    versions = {v.strip() for entry in whole.values() if isinstance(entry, dict) and entry.get("code_version")
                for v in entry["code_version"].split(",")}
    whole["code_version"] = ", ".join(sorted(versions))
    write_json(path, whole)


class DoneTable:
    """{key: result} of the finished jobs, kept in one JSON file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.done: dict[str, dict] = json.loads(self.path.read_text())["done"] if self.path.is_file() else {}

    def __contains__(self, key: str) -> bool:
        return key in self.done

    def __getitem__(self, key: str) -> dict:
        return self.done[key]

    def mark(self, key: str, result: dict) -> None:
        self.done[key] = result
        write_json(self.path, {"done": self.done})


def job_dir(run_root: Path, key: str) -> Path:
    return Path(run_root) / key


def arm_and_seed(key: str) -> tuple[str, int]:
    """An "ARM/seedN" job key's arm and seed."""
    arm, seed_part = key.split("/")
    return arm, int(seed_part[len("seed"):])


def finish_job(run_root: Path, key: str, result: dict) -> None:
    """A worker's last act: its result, which the scheduler moves into the done-table."""
    write_json(job_dir(run_root, key) / RESULT_FILE, result)


def run_jobs(jobs: Sequence[Job], table: DoneTable, command: Callable[[Job, int | None], list[str]], run_root: Path,
             parallel: int = 1, poll_s: float = 2.0, log: Callable[[str], None] = print,
             on_done: Callable[[str], None] | None = None) -> list[str]:
    """Run every job not in `table`, dependencies first, `parallel` at a time; returns the keys
    that failed (or wait on one that failed). `command(job, threads)` is the worker's argv;
    `on_done(key)` runs after each job lands in the table (e.g. rewrite the figures)."""
    keys = {j.key for j in jobs}
    for job in jobs:
        missing = [k for k in job.after if k not in keys and k not in table]
        if missing:
            raise ValueError(f"job {job.key} waits for {missing[0]}, which is not among the jobs")
        result = job_dir(run_root, job.key) / RESULT_FILE
        if job.key not in table and result.is_file():  # finished while the scheduler was gone
            table.mark(job.key, json.loads(result.read_text()))
    pending = [j for j in jobs if j.key not in table]
    if skipped := len(jobs) - len(pending):
        log(f"{skipped} of {len(jobs)} runs already done ({table.path}): skipped")
    threads = 1 if parallel > 1 else None
    running: list[tuple[Job, subprocess.Popen, object]] = []
    failed: list[str] = []
    # `kill SCHEDULER` (SIGTERM) ends its workers too, as Ctrl-C does: an orphaned worker would go
    # on writing the checkpoints the next scheduler's worker of that job resumes from
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        _schedule(pending, running, failed, table, command, run_root, parallel, threads, poll_s, log, on_done)
    finally:
        signal.signal(signal.SIGTERM, previous)
        for job, proc, out in running:
            proc.terminate()
        for job, proc, out in running:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            out.close()
            log(f"{job.key}: stopped (it resumes when the script runs again)")
    return failed


def _schedule(pending, running, failed, table, command, run_root, parallel, threads, poll_s, log, on_done) -> None:
    while pending or running:
        for job in [j for j in pending if all(k in table for k in j.after)]:
            if len(running) >= parallel:
                break
            pending.remove(job)
            folder = job_dir(run_root, job.key)
            folder.mkdir(parents=True, exist_ok=True)
            resumed = " (resuming)" if any(folder.iterdir()) else ""
            out = open(folder / "job.log", "a")
            env = {**os.environ, **({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if threads else {})}
            running.append((job, subprocess.Popen(command(job, threads), stdout=out, stderr=subprocess.STDOUT,
                                                  env=env), out))
            log(f"{job.key}: started{resumed} (log {folder / 'job.log'})")
        while blocked := [j for j in pending if any(k in failed for k in j.after)]:  # and those that wait on them
            for job in blocked:
                pending.remove(job)
                failed.append(job.key)
                log(f"{job.key}: not started, it waits for a failed run")
        if not running:
            if pending:  # cannot happen with known keys and no failures; never spin
                raise RuntimeError(f"jobs {[j.key for j in pending]} wait for runs that never finish")
            break
        time.sleep(poll_s)
        for item in list(running):
            job, proc, out = item
            if proc.poll() is None:
                continue
            out.close()
            running.remove(item)
            result = job_dir(run_root, job.key) / RESULT_FILE
            if proc.returncode == 0 and result.is_file():
                table.mark(job.key, json.loads(result.read_text()))
                log(f"{job.key}: done")
                if on_done is not None:
                    on_done(job.key)
            else:
                failed.append(job.key)
                log(f"{job.key}: FAILED (exit {proc.returncode}): {last_line(job_dir(run_root, job.key) / 'job.log')}")


def hold_job_lock(run_root: Path, key: str):
    """A worker's first act: an exclusive lock on its job's folder, held until it exits, so that
    two processes never train the same run (a worker left over from a killed scheduler); the
    second one stops with one line. Returns the open lock file (keep a reference to it)."""
    import fcntl

    folder = job_dir(run_root, key)
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / ".lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "?"
        raise SystemExit(f"{key}: another process (pid {owner}) is running this job: wait for it to end, or end "
                         "it, then run the script again") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def run_worker(run_root: Path, key: str, run_job: Callable[[str], dict], user_errors: tuple = ()) -> None:
    """A worker process (`--job KEY`): hold the job's lock, run it, leave its result for the
    scheduler; a ConfigError (or one of `user_errors`) ends it with one line naming the job."""
    from agentgym.errors import ConfigError

    lock = hold_job_lock(run_root, key)  # noqa: F841  (held until this process exits)
    try:
        finish_job(run_root, key, run_job(key))
    except (ConfigError, *user_errors) as exc:
        raise SystemExit(f"{key}: {exc}") from None


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(empty log)"


def worker_command(script: str | Path, run_root: Path, extra: Sequence[str]) -> Callable[[Job, int | None], list[str]]:
    """The argv of a job's worker: this script with --job KEY, the run root, the user's arguments."""
    def command(job: Job, threads: int | None) -> list[str]:
        threads_arg = ["--threads", str(threads)] if threads else []
        return [sys.executable, str(script), "--job", job.key, "--runs", str(run_root), *threads_arg, *extra]

    return command


def passthrough(argv: Sequence[str], overrides: Sequence[str] = ()) -> list[str]:
    """The scheduler's arguments minus its own (--parallel): what each worker is started with.
    The config overrides go last, after "--": `--seeds 0 1 iterations=2` parses in the scheduler
    but a worker's "--job KEY" in front would leave the override to --seeds."""
    out, skip, rest = [], False, set(overrides)
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--parallel":
            skip = True
            continue
        if arg.startswith("--parallel=") or arg == "--" or arg in rest:
            continue
        out.append(arg)
    return out + (["--", *overrides] if overrides else [])


def schedule(args, jobs: Sequence[Job], report: Callable, script: str | Path, run_root: Path,
             write: Callable[[Path, dict], None] = write_json) -> tuple[dict, list[str]]:
    """Run every job not done yet (none with --report-only), `--parallel` at a time, rewriting
    args.out after each finished run (results land as they come) with `write(path, report)` (the
    whole file, or one key of it: write_json_key); the final report and the keys of the runs that
    failed or wait on one that did."""
    table = DoneTable(run_root / "done.json")

    def write_figures(_key: str = "") -> None:
        write(Path(args.out), report(args, table))

    failed = [] if args.report_only else run_jobs(jobs, table, worker_command(script, run_root, passthrough(sys.argv[1:], args.overrides)),
                                                  run_root, args.parallel, on_done=write_figures)
    out = report(args, table)
    write(Path(args.out), out)
    return out, failed


def stop_if_failed(failed: list[str]) -> None:
    if failed:
        raise SystemExit(f"{len(failed)} runs failed or wait on one that failed: {', '.join(failed)}")

def check_settings(run_root: Path, settings: dict) -> None:
    """The runs in `run_root` belong to one experiment: refuse (one line) to add runs made with
    other settings to its done-table."""
    path = Path(run_root) / "settings.json"
    settings = json.loads(json.dumps(settings, default=str))
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved != settings:
            changed = [k for k in sorted(set(saved) | set(settings)) if saved.get(k) != settings.get(k)]
            raise SystemExit(f"the runs in {run_root} were made with other settings ({', '.join(changed)}: "
                             f"{saved.get(changed[0])!r} -> {settings.get(changed[0])!r}): use the same "
                             "arguments, or another --runs")
        return
    write_json(path, settings)


# --- tasks and evaluation -------------------------------------------------------------------------
def validation_tasks(cfg, num: int, exclude: Sequence = ()) -> list:
    """`num` validation tasks: fresh tasks drawn from the env's generator with VALIDATION_SEED
    under the run's filter (categories, task filter), so never held-out nor reserved for
    heldout_unseen (agentgym.tasks.generation.fresh_tasks), with every task in `exclude` (the training pool)
    taken out. The same tasks for every arm and seed of an experiment."""
    from agentgym.registration import get_task_space
    from agentgym.tasks.generation import fresh_tasks
    from agentgym.trainers.task_selection import filter_tasks

    space = get_task_space(cfg.env.id)
    banned = {t.task_id for t in exclude} | {t.content_key for t in exclude}

    def keep(spec) -> bool:
        return bool(filter_tasks([spec], cfg.env.task_filter, cfg.env.categories, space))

    tasks: list = []
    for draw in (2 * num, num + len(banned)):  # few collide with a training pool: try a small draw first
        drawn = fresh_tasks(space, draw, seed=VALIDATION_SEED, keep=keep)
        tasks = [t for t in drawn if t.task_id not in banned and t.content_key not in banned][:num]
        if len(tasks) == num:
            break
    if len(tasks) < num:
        raise ValueError(f"only {len(tasks)} validation tasks left after removing the training pool: ask for fewer")
    return tasks


def split_file(cfg, split: str, folder: Path) -> Path:
    """The run's tasks of `split` (heldout, heldout_unseen) under its filter, as a tasks file."""
    import dataclasses

    from agentgym.registration import get_task_space
    from agentgym.trainers.task_selection import write_eval_tasks

    other = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, split=split))
    folder.mkdir(parents=True, exist_ok=True)
    return write_eval_tasks(other.eval, other.env, get_task_space(cfg.env.id), folder)


def evaluate_on(cfg, policy, tasks_file: Path) -> dict:
    """Success on the tasks of `tasks_file` with the run's evaluation settings and seed (the
    same episodes for every arm of a seed): {success_rate, per_task_success, ...}."""
    from agentgym.trainers.training import evaluate_policy

    ev = evaluate_policy(cfg.eval, cfg.env, policy, tasks_file, cfg.seed,
                         rollout=cfg.rollout)
    keep = ("success_rate", "invalid_action_rate", "mean_steps", "per_task_success", "episodes", "num_tasks")
    return {k: ev[k] for k in keep if k in ev}


# --- the jobs of an equal-compute comparison --------------------------------------------------------
@dataclass(frozen=True)
class ArmJob:
    """A job of one arm: a tuning run ("tune/ARM/lrX", on the tuning seed, scored on validation
    tasks) or a final run ("ARM/seedN", at the arm's chosen rate, scored on the held-out sets). An
    imitation arm's job matches the compute of an RL run, `matched_to`."""
    key: str
    arm: str
    seed: int
    lr: float
    tuning: bool
    matched_to: str | None  # the RL job whose compute it matches; None for an RL arm


def arm_job(key: str, tune_seed: int, chosen_lr: Callable[[str], float], rl_arm: str,
            rl_arms: Sequence[str]) -> ArmJob:
    """What job `key` runs. An imitation arm's tuning run matches `rl_arm`'s tuning run at its chosen
    rate, its final run `rl_arm`'s run of the same seed; `chosen_lr(arm)` is the arm's rate."""
    kind, rest = key.split("/", 1)
    if kind == "tune":
        arm, lr_part = rest.split("/")
        matched = None if arm in rl_arms else tune_key(rl_arm, chosen_lr(rl_arm))
        return ArmJob(key, arm, tune_seed, float(lr_part[len("lr"):]), True, matched)
    arm, seed = arm_and_seed(key)
    return ArmJob(key, arm, seed, chosen_lr(arm), False, None if arm in rl_arms else f"{rl_arm}/seed{seed}")


def tune_key(arm: str, lr: float) -> str:
    """The key of an arm's tuning run at rate `lr`."""
    return f"tune/{arm}/lr{lr:g}"


def best_rate(table, arm: str, rates: Sequence[float]) -> float:
    """An arm's rate: the only one of `rates`, or the one whose tuning run in `table` (a DoneTable or
    its records) has the best validation success, the first of equal bests (KeyError while one of
    those runs is not done)."""
    if len(rates) == 1:
        return rates[0]
    scores = [table[tune_key(arm, lr)]["validation"]["success_rate"] for lr in rates]
    return rates[max(range(len(rates)), key=lambda i: scores[i])]


def arm_evals(cfg, job: ArmJob, folder: Path, validation_file: Callable[[], Path]) -> dict[str, Path]:
    """The tasks files a job is evaluated on besides the run's own held-out set: a tuning run looks at
    validation tasks only (the trainer's own held-out evaluations are cut to one episode of one
    task, unread), a final run also at heldout_unseen."""
    if job.tuning:
        cfg.eval.num_tasks, cfg.eval.episodes_per_task = 1, 1
        return {"validation": validation_file()}
    return {"heldout_unseen": split_file(cfg, "heldout_unseen", folder)}


def matched_budget(table: DoneTable, job: ArmJob, rl_name: str = "RL") -> dict:
    """The compute (rl_compute) of the RL run an imitation job matches; one line when it made no step."""
    budget = table[job.matched_to]["compute"]
    if not budget["optimizer_steps"]:
        raise SystemExit(f"{job.key}: the {rl_name} run it matches ({job.matched_to}) made no optimizer steps: "
                         "nothing to match")
    return budget


def evaluate_trained(cfg, folder: Path, job: ArmJob, evals: dict[str, Path]) -> dict:
    """An imitation job's trained model (its latest checkpoint) on each tasks file of `evals`, a
    final run's on the run's own held-out set first (the RL run's tasks and episode seeds: paired
    per task)."""
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.run_setup import make_policy

    policy = make_policy(cfg.policy, latest_checkpoint(folder) / "model")
    if not job.tuning:
        evals = {cfg.eval.split: split_file(cfg, cfg.eval.split, folder), **evals}
    return {name: evaluate_on(cfg, policy, path) for name, path in evals.items()}


# --- the runs every experiment has: a warm start and an RL run -------------------------------------
def use_threads(cfg) -> None:
    """torch_threads for work outside train() (which sets it itself): SFT, RFT, evaluations. Two
    OpenMP threads on a shared, oversubscribed CPU ran an SFT step 4x slower than one."""
    from agentgym.trainers.threads import set_torch_threads

    set_torch_threads(cfg.torch_threads, print)


def run_warm(cfg, folder: Path, log: Callable[[str], None] = print) -> dict:
    """The seed's warm start, shared by all its arms: the tiny model and its SFT on the
    configured demonstrator (trainers/setup.py:prepare_start_model, in `folder`). Not
    checkpointed inside: an interrupted one is rebuilt (its settings record is written last)."""
    import torch

    from agentgym.trainers.run_setup import prepare_start_model, quiet_transformers

    quiet_transformers()
    use_threads(cfg)
    torch.manual_seed(cfg.seed)  # as train() does before building the start model
    model, info = prepare_start_model(cfg, folder, log)
    return {"model": str(model), "setup": info}


def check_shared_warm(cfg, folder: Path) -> None:
    """Another experiment's warm start may be used only when it was built from these settings:
    prepare_start_model would otherwise remove it and build this one in its place."""
    from agentgym.trainers.run_setup import SETTINGS_FILE, settings_hash, sft_settings, tiny_settings

    record = Path(folder) / "sft_model" / SETTINGS_FILE
    if not record.is_file():
        return  # not built yet (or interrupted): built here, where the other experiment will reuse it
    start = None if cfg.policy.model else {"tiny": settings_hash(tiny_settings(cfg.env, cfg.tiny, cfg.sft, cfg.seed))}
    if start is None or json.loads(record.read_text()).get("hash") != settings_hash(
            sft_settings(cfg.env, cfg.policy, cfg.sft, cfg.seed, start)):
        raise SystemExit(f"{folder} holds a warm start built from other settings: give the same overrides as the "
                         "experiment that built it, or drop --warm-runs")


def warm_overrides(warm: dict) -> list[str]:
    """An arm's config starts from the seed's warm start, with no SFT or tiny build of its own."""
    return [f"policy.model={warm['model']}", "sft.enabled=false", "tiny.build=false"]


def run_rl(cfg, folder: Path, extra_eval: dict[str, Path], log: Callable[[str], None] = print) -> dict:
    """train(cfg) in `folder`, resumed from its checkpoints when there are any; then the final
    model on each tasks file of `extra_eval` ({name: file}). The final evaluation of the run's own
    held-out set is its last one (never the best seen)."""
    from agentgym.trainers.checkpoint import latest_checkpoint
    from agentgym.trainers.training import train
    from agentgym.trainers.run_setup import make_policy

    resume = (folder / "checkpoints" / "latest").is_file()
    summary = train(cfg, resume=resume, overwrite=not resume, log=log)  # killed before a checkpoint: start over
    evals = json.loads((latest_checkpoint(folder) / "state.json").read_text())["evals"]
    keep = ("success_rate", "invalid_action_rate", "mean_steps", "per_task_success")
    out = {"lr": cfg.ppo.lr, "iterations": summary["iterations"], "stopped_early": summary["stopped_early"],
           cfg.eval.split: {k: evals[-1].get(k) for k in keep}, f"{cfg.eval.split}_before": {k: evals[0].get(k)
                                                                                          for k in keep},
           "compute": rl_compute(folder), "credit": credit_curve(folder), "rl_seconds": summary["rl_seconds"]}
    if extra_eval:
        policy = make_policy(cfg.policy, folder / "final_model")
        for name, tasks_file in extra_eval.items():
            out[name] = evaluate_on(cfg, policy, tasks_file)
    return out


def credit_curve(run_dir: Path) -> list[dict]:
    """Per iteration, the credit diagnostics the trainer logged (trainers/diagnostics.py)."""
    from agentgym.trainers.logging_utils import read_metrics

    rows = {int(r["iteration"]): r for r in read_metrics(run_dir) if "credit/idle_frac" in r}
    return [{"iteration": i, **{k[len("credit/"):]: v for k, v in rows[i].items() if k.startswith("credit/")}}
            for i in sorted(rows)]


# --- compute of a finished RL run -----------------------------------------------------------------
def rl_compute(run_dir: Path) -> dict:
    """Optimizer steps, trained tokens and samples of an RL run, per iteration and in total, from
    its metrics.jsonl (tokens count prompt + response of every trained sample, times ppo.epochs)."""
    from agentgym.trainers.logging_utils import read_metrics

    rows = [r for r in read_metrics(run_dir) if "train/optimizer_steps" in r or "train/tokens" in r]
    last: dict[int, dict] = {}
    for r in rows:  # a resumed run logged the iterations after its checkpoint again: keep the last
        last[int(r["iteration"])] = r
    its = sorted(last)
    steps = [int(last[i].get("train/optimizer_steps") or 0) for i in its]
    tokens = [int(last[i].get("train/tokens") or 0) for i in its]
    samples = [int(last[i].get("train/samples") or 0) for i in its]
    episodes = [int(last[i].get("rollout/episodes") or 0) for i in its]
    return {"optimizer_steps": sum(steps), "tokens": sum(tokens), "samples": sum(samples),
            "rollout_episodes": sum(episodes), "steps_per_iteration": steps, "iterations": len(its)}


# --- SFT that checkpoints and resumes exactly -----------------------------------------------------
def sft_optimizer(policy, lr: float, total_steps: int):
    """AdamW with train_sft's schedule: cosine from lr down to 0.1 lr over `total_steps`."""
    import math

    import torch

    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=lr, weight_decay=0.0)
    # a Python float, not numpy's: the scheduler's state goes into a checkpoint read with weights_only
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / max(total_steps, 1))))
    return optimizer, scheduler


def sft_update(policy, optimizer, scheduler, chunk, micro_batch_size: int | None = None) -> tuple[float, int]:
    """One optimizer step of cross-entropy on `chunk`'s targets, its gradient accumulated over
    passes of `micro_batch_size` samples (None: one pass; a real model's batch of 32 steps would not
    fit in memory); returns (loss, tokens trained)."""
    import torch

    from agentgym.trainers.sft import sft_loss
    from agentgym.trainers.samples import collate

    policy.model.train()
    optimizer.zero_grad(set_to_none=True)
    size = micro_batch_size or len(chunk)
    targets = float(sum(s.num_loss_tokens for s in chunk)) if size < len(chunk) else None
    loss = 0.0
    for first in range(0, len(chunk), size):
        batch = collate(chunk[first:first + size], policy.tokenizer.pad_token_id, device=policy.device)
        part = sft_loss(policy.model, batch, denom=targets)
        if not torch.isfinite(part):
            raise FloatingPointError(f"SFT loss became {float(part)}: lower the learning rate")
        part.backward()
        loss += float(part.detach())
    torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    policy.model.eval()
    return loss, sum(len(s) for s in chunk)


def sft_steps(policy, samples: list, run_dir: Path, steps: int, batch_size: int, lr: float, seed: int,
              checkpoint_every: int = 50, log: Callable[[str], None] = print,
              micro_batch_size: int | None = None) -> dict:
    """`steps` optimizer steps of SFT on `samples` in batches of `batch_size` (each step's gradient
    accumulated over passes of `micro_batch_size` samples, as sft_update does), checkpointed every
    `checkpoint_every` steps in run_dir/checkpoints and resumed from the latest one: the data
    order of epoch e is a permutation seeded by (seed, e), so step k's batch never depends on
    how many restarts came before. Returns {steps, tokens, first_loss, final_loss}."""
    import numpy as np

    from agentgym.trainers.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

    if not samples:
        raise ValueError("SFT has no samples to train on")
    optimizer, scheduler = sft_optimizer(policy, lr, steps)
    state = {"iteration": 0, "evals": [], "tokens": 0, "losses": []}
    if (checkpoint := latest_checkpoint(run_dir)) is not None:
        state = load_checkpoint(checkpoint, policy, optimizer, scheduler, {})
        log(f"SFT resumed at step {state['iteration']} of {steps} ({checkpoint})")
    per_epoch = (len(samples) + batch_size - 1) // batch_size
    order, order_epoch = None, -1
    while state["iteration"] < steps:
        k = state["iteration"]
        epoch, offset = divmod(k, per_epoch)
        if epoch != order_epoch:
            order, order_epoch = np.random.default_rng([seed, epoch]).permutation(len(samples)), epoch
        chunk = [samples[j] for j in order[offset * batch_size:(offset + 1) * batch_size]]
        loss, tokens = sft_update(policy, optimizer, scheduler, chunk, micro_batch_size)
        state["iteration"] += 1
        state["tokens"] += tokens
        state["losses"].append(loss)
        if state["iteration"] % checkpoint_every == 0 or state["iteration"] == steps:
            save_checkpoint(run_dir, state["iteration"], policy, optimizer, scheduler, {}, state)
            log(f"SFT step {state['iteration']}/{steps}: loss {np.mean(state['losses'][-checkpoint_every:]):.4f}")
    losses = state["losses"]
    return {"steps": state["iteration"], "tokens": state["tokens"], "first_loss": losses[0] if losses else None,
            "final_loss": float(np.mean(losses[-5:])) if losses else None}


# --- figures ------------------------------------------------------------------------------------
def paired_diff(per_task_a: Sequence[dict], per_task_b: Sequence[dict], seed: int = 0) -> dict:
    """Mean over seeds and tasks of a - b with a 95% interval, pairing each task within its seed
    (the same held-out episodes seeds) and pooling the pairs of every seed (a task-level
    bootstrap of the pooled pairs, agentgym.evaluation.stats.paired_gain)."""
    from agentgym.evaluation.stats import paired_gain

    a, b, per_seed = {}, {}, []
    for i, (pa, pb) in enumerate(zip(per_task_a, per_task_b)):
        common = set(pa) & set(pb)
        for task in common:
            a[f"{i}/{task}"], b[f"{i}/{task}"] = pa[task], pb[task]
        per_seed.append(sum(pa[t] - pb[t] for t in common) / max(len(common), 1))
    gain = paired_gain(b, a, seed=seed)
    return {"diff": gain.value, "ci": [gain.low, gain.high], "pairs": len(a), "seeds": len(per_task_a),
            "per_seed": per_seed, "seed_ci": seed_interval(per_seed)}


# two-sided 95% quantiles of Student's t by degrees of freedom (no scipy in the dependencies)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def seed_interval(per_seed: Sequence[float]) -> list[float] | None:
    """95% t-interval of the mean over seeds of per-seed differences: unlike the task-level
    interval, it holds the seed-to-seed spread of training (None below two seeds)."""
    import statistics

    n = len(per_seed)
    if n < 2:
        return None
    t = _T95[max(k for k in _T95 if k <= n - 1)]  # the next lower df: a slightly wider interval
    half = t * statistics.stdev(per_seed) / n ** 0.5
    mean = statistics.fmean(per_seed)
    return [mean - half, mean + half]


def power_statement(num_tasks: int, episodes_per_task: int, seeds: int) -> str:
    """What paired differences over `seeds` x the held-out set can detect at 80% power."""
    from agentgym.evaluation.stats import min_detectable_difference

    mdd = min_detectable_difference(num_tasks * seeds, episodes_per_task)
    return (f"{seeds} seeds x {num_tasks} tasks x {episodes_per_task} episodes: a difference of {mdd:.3f} in success "
            f"is detected with 80% power at the 5% level (agentgym.evaluation.stats.min_detectable_difference over "
            f"{seeds * num_tasks} task evaluations, episodes of a task correlated with icc 0.3, two independent "
            f"evaluations: the paired interval is narrower; the seed-to-seed spread of training is not in it)")
