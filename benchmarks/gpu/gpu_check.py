"""The GPU check (docs/gpu.md): what agentgym's CUDA path does on a real card, in one run.

    bash scripts/gpu_check.sh                                # the GPU machine: installs what travels, then this
    python benchmarks/gpu/gpu_check.py --device cpu --smoke      # tiny shapes on a CPU, seconds (the test suite's)
    python benchmarks/gpu/gpu_check.py --prepare-warm-start .whl/warm_start   # here, once: the main job's warm start

Parts, in this order, each started only while --budget-s has room for it:

  tests       `pytest -m gpu` on tests/trainers/test_cuda.py: bf16 and fp32 HF engine on CUDA, token in /
              token out with the first PPO ratio 1 within the dtype's tolerance, admissible-only decoding,
              LoRA, the data-parallel launch with one rank, checkpoint save and exact resume.
  main_job    the household-tiny preset's RL phase (GiGPO, 8 tasks x 6 episodes) from the warm start
              carried in --warm-start, a few iterations on --device and then on --cpu-threads CPU threads
              of the same machine, with each iteration's time split (rollout / scoring+advantages / update).
  throughput  Qwen2.5-1.5B and -0.5B shapes built from their configs with random weights (nothing is
              downloaded; the warm start's tokenizer), LoRA and full fine-tuning, one household iteration
              of 8 tasks x 8 episodes after a warm-up one: rollout tokens/s with prefill and decode
              apart, update tokens/s, model FLOPs utilization against the card's dense bf16 peak, peak
              memory; the 1.5B full update of a third iteration under torch.profiler (--profile).

Writes one JSON (--out, rewritten as each part lands) and prints a short table. Bad input (--device
cuda without CUDA, a shape too big for the device's memory) is one line before anything loads.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
GPU_TESTS = "tests/trainers/test_cuda.py"

# Qwen2.5's published configs (config.json of Qwen/Qwen2.5-*-Instruct), the fields that set the compute.
SHAPES: dict[str, dict] = {
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
    "qwen2.5-72b": dict(hidden_size=8192, intermediate_size=29568, num_hidden_layers=80, num_attention_heads=64,
                        num_key_value_heads=8, vocab_size=152064, tie_word_embeddings=False),
    # the CPU smoke run's: the same architecture, small enough for seconds
    "smoke": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=3000, tie_word_embeddings=True),
}
DEFAULT_SHAPES = ["qwen2.5-1.5b", "qwen2.5-0.5b"]  # the larger first: its update's MFU is the figure asked for
MODES = ("lora", "full")

# Dense bf16 tensor-core peaks, TFLOP/s, by what torch.cuda.get_device_name() contains (first match wins).
PEAK_BF16_TFLOPS = [("H200", 989.4), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.4),
                    ("A100", 312.0), ("L40S", 362.1), ("A10G", 70.0)]

# Per parameter, bytes the run holds on the device besides activations: bf16 weights (2); full
# fine-tuning adds bf16 gradients (2) and AdamW's two moments in the parameters' dtype (4). fp32 (CPU)
# doubles each. ACTIVATION_MARGIN covers activations and allocator slack of a household iteration.
BYTES_PER_PARAM = {"lora": 2, "full": 8}
ACTIVATION_MARGIN = 1.25


class InputError(Exception):
    """Bad input to this script: printed as one line, exit code 2."""


# --- shapes, counts, FLOPs ----------------------------------------------------------------------
def param_counts(shape: dict) -> dict:
    """Parameters of a Qwen2 model of this shape, counted from the config (q/k/v have biases, o and
    the MLP none, two RMSNorms a layer and one at the end): total, and `matmul` = those a token's
    forward multiplies by (everything but the embedding lookup; the LM head even when tied)."""
    h, i, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    per_layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    embed = shape["vocab_size"] * h
    body = layers * per_layer + h
    head = 0 if shape["tie_word_embeddings"] else embed
    return {"total": embed + body + head, "body": body, "lm_head": embed}


def memory_needed_gib(shape: dict, mode: str, fp32: bool) -> float:
    return param_counts(shape)["total"] * BYTES_PER_PARAM[mode] * (2 if fp32 else 1) * ACTIVATION_MARGIN / 2**30


def peak_tflops(device_name: str) -> float | None:
    return next((tf for key, tf in PEAK_BF16_TFLOPS if key in device_name), None)


# --- bad input: one line each, before anything loads --------------------------------------------
def device_memory_gib(device: str) -> tuple[str, float]:
    """(what the device is called, its memory in GiB): the card's, or this machine's RAM for cpu."""
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return props.name, props.total_memory / 2**30
    return "this machine's RAM", os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def check_inputs(args) -> None:
    from agentgym.errors import AgentGymError
    from agentgym.policies.model_files import check_device

    try:
        check_device(args.device, what="--device")
    except AgentGymError as exc:
        raise InputError(str(exc)) from None
    unknown = [s for s in args.shapes if s not in SHAPES]
    if unknown:
        raise InputError(f"--shapes {','.join(unknown)}: unknown; choose from {', '.join(SHAPES)}")
    bad_modes = [m for m in args.modes if m not in MODES]
    if bad_modes:
        raise InputError(f"--modes {','.join(bad_modes)}: unknown; choose from {', '.join(MODES)}")
    if "throughput" in args.parts:
        name, capacity = device_memory_gib(args.device)
        for shape in args.shapes:
            for mode in args.modes:
                need = memory_needed_gib(SHAPES[shape], mode, fp32=args.device == "cpu")
                if need > capacity:
                    raise InputError(f"{shape} with {mode} fine-tuning needs about {need:.0f} GiB, more than "
                                     f"{name}'s {capacity:.0f} GiB: leave it out of --shapes or use --modes lora")
    if "main_job" in args.parts and not args.smoke and not (Path(args.warm_start) / "config.json").is_file():
        raise InputError(f"no warm start in {args.warm_start}: run `bash scripts/gpu_wheels.sh` here first "
                         "(it builds .whl/warm_start), or pass --smoke")


# --- the machine -------------------------------------------------------------------------------
def machine(device: str) -> dict:
    import torch
    import transformers

    info = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "cpus": os.cpu_count()}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(card=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                    multiprocessors=props.multi_processor_count, peak_bf16_tflops=peak_tflops(props.name))
        if shutil.which("nvidia-smi"):
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True)
            info["driver"] = smi.stdout.strip() or None
    else:
        info.update(card=platform.processor() or platform.machine(), peak_bf16_tflops=None)
    return info


# --- part 1: the gpu-marked tests ---------------------------------------------------------------
def run_tests(out_dir: Path, timeout_s: float) -> dict:
    """pytest -m gpu in a subprocess; the counts and each test's outcome from its JUnit XML."""
    xml = out_dir / "gpu_tests.xml"
    cmd = [sys.executable, "-m", "pytest", GPU_TESTS, "-m", "gpu", "-q", "-p", "no:cacheprovider",
           f"--junitxml={xml}", "-o", "junit_family=legacy"]  # legacy: keeps the tests' record_property figures
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        tail = (proc.stdout + proc.stderr)[-4000:]
    except subprocess.TimeoutExpired as exc:
        return {"error": f"pytest ran past {timeout_s:.0f}s", "output_tail": str(exc.stdout or "")[-4000:]}
    result: dict = {"seconds": time.perf_counter() - t0, "exit_code": proc.returncode, "output_tail": tail,
                    "tests": {}}
    if xml.is_file():
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
            detail = next((c.get("message", "") for c in case if c.tag in ("failure", "error", "skipped")), "")
            figures = {p.get("name"): p.get("value") for p in case.iter("property")}
            result["tests"][case.get("name")] = {"outcome": outcome, "seconds": float(case.get("time", 0)),
                                                 "detail": detail[:300], **figures}
    counts: dict = {}
    for row in result["tests"].values():
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    result["counts"] = counts
    return result


# --- part 2: the main job's RL phase --------------------------------------------------------------
def smoke_warm_start(out_dir: Path) -> Path:
    """--smoke without a warm start: a tiny random household model (seconds), standing in for it."""
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import collect_env_texts

    folder = out_dir / "smoke_warm_start"
    if (folder / "config.json").is_file():
        return folder
    chat = load_config("household-tiny", []).env.chat
    texts = collect_env_texts("agentgym/Household-v0", num_tasks=4, chat=chat)
    return build_tiny_model(folder, texts=texts, vocab_size=400, hidden=32, layers=1, heads=2)


def prepare_warm_start(out: Path, threads: int) -> Path:
    """The main job's warm start (household-tiny preset, seed 0: tiny model, SFT), copied to `out`."""
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import prepare_start_model

    run_dir = Path(tempfile.mkdtemp(prefix="agentgym_warm_start_"))
    cfg = load_config("household-tiny", [f"run_dir={run_dir}", f"torch_threads={threads}"])
    import torch

    torch.set_num_threads(threads)
    model, _ = prepare_start_model(cfg, run_dir, log=print)
    shutil.copytree(model, out, dirs_exist_ok=True)
    return out


def iteration_split(metrics: dict) -> dict:
    t = metrics["time"]
    return {"iteration_s": t["iteration_s"], "rollout_s": t["rollout_s"], "update_s": t["update_s"],
            "score_and_advantages_s": t["iteration_s"] - t["rollout_s"] - t["update_s"],
            "iteration_cpu_s": t["iteration_cpu_s"],  # this process's CPU seconds: what a shared CPU cannot inflate
            "response_tokens": metrics["rollout"]["response_tokens"], "train_tokens": metrics["train"]["tokens"],
            "success_rate": metrics["rollout"]["success_rate"]}


def run_main_job(device: str, warm_start: Path, iterations: int, threads: int | None, run_dir: Path,
                 smoke: bool) -> dict:
    """household-tiny's RL phase from `warm_start` for `iterations` iterations on `device`; the first
    is a warm-up (CUDA context, kernels' first launches), the rest give the per-iteration figures."""
    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import train

    overrides = [f"run_dir={run_dir}", f"policy.model={warm_start}", f"policy.device={device}", "tiny.build=false",
                 "sft.enabled=false", f"iterations={iterations}", "eval.num_tasks=1", "eval.episodes_per_task=1",
                 "checkpoint_every=0", "time_budget_s=null", "log.plot=false", f"torch_threads={threads or 'null'}"]
    if smoke:
        overrides += ["rollout.tasks_per_iter=2", "rollout.group_size=2", "env.fresh_tasks=8",
                      "env.env_kwargs={max_episode_steps: 3}"]
    rows: list[dict] = []
    t0 = time.perf_counter()
    train(load_config("household-tiny", overrides), log=lambda *_: None,
          on_iteration=lambda m: rows.append(iteration_split(m)))
    timed = rows[1:] or rows
    mean = {k: sum(r[k] for r in timed) / len(timed) for k in timed[0]}
    return {"device": device, "threads": threads, "iterations": rows, "mean_after_first": mean,
            "wall_s": time.perf_counter() - t0}


# --- part 3: throughput on Qwen2.5 shapes ------------------------------------------------------------
@dataclass
class PhaseTimer:
    """Times the model's generation forwards (inference mode, with a KV cache) by phase: a forward
    over more than one new token per row is a prefill, one token per row a decode step. Each timed
    forward is bracketed by device synchronizations: the decode loop reads every sampled token back
    to the host anyway, so the brackets cost little."""

    prefill_s: float = 0.0
    decode_s: float = 0.0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    _start: float = 0.0

    def attach(self, model) -> None:
        model.register_forward_pre_hook(self._before, with_kwargs=True)
        model.register_forward_hook(self._after, with_kwargs=True)

    def reset(self) -> None:
        self.prefill_s = self.decode_s = 0.0
        self.prefill_tokens = self.decode_tokens = 0

    @staticmethod
    def _timed(kwargs) -> bool:
        import torch

        return torch.is_inference_mode_enabled() and kwargs.get("past_key_values") is not None

    def _sync(self, kwargs) -> None:
        import torch

        if kwargs["input_ids"].is_cuda:
            torch.cuda.synchronize()

    def _before(self, module, args, kwargs):
        if self._timed(kwargs):
            self._sync(kwargs)
            self._start = time.perf_counter()

    def _after(self, module, args, kwargs, output):
        if not self._timed(kwargs):
            return
        self._sync(kwargs)
        seconds = time.perf_counter() - self._start
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        if ids.shape[1] > 1:
            self.prefill_s += seconds
            self.prefill_tokens += int(mask[:, -ids.shape[1]:].sum())  # real tokens, not the padding
        else:
            self.decode_s += seconds
            self.decode_tokens += ids.shape[0]


def random_model_folder(shape_name: str, tokenizer_dir: Path, device: str, out: Path) -> Path:
    """A Qwen2 model of this shape with random weights (built on the device, bf16 there), saved with
    the warm start's tokenizer: the folder the trainer loads, as it would load the real model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    config = Qwen2Config(**SHAPES[shape_name], **ids, max_position_embeddings=32768, rope_theta=1e6,
                         rms_norm_eps=1e-6)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def profiled_update(ppo_update, calls: list, at_call: int, table: list):
    """`ppo_update`, its `at_call`-th call run under torch.profiler: the top operators by device
    time (by CPU time without a device) land in `table`, one line each."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    def update(*args, **kwargs):
        calls.append(1)
        if len(calls) != at_call:
            return ppo_update(*args, **kwargs)
        cuda = torch.cuda.is_available()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            out = ppo_update(*args, **kwargs)
            if cuda:
                torch.cuda.synchronize()
        key = "cuda_time_total" if cuda else "cpu_time_total"
        table.extend(prof.key_averages().table(sort_by=key, row_limit=20).splitlines())
        return out

    return update


def run_throughput(shape_name: str, mode: str, device: str, model_dir: Path, run_dir: Path, peak: float | None,
                   tasks: int, group: int, smoke: bool, profile: bool = False) -> dict:
    """Two household iterations (tasks x group episodes) of this model; the second is measured.
    profile: a third iteration's update runs under torch.profiler (its table in the result)."""
    import torch

    from agentgym.trainers import run_setup, training
    from agentgym.trainers.config import load_config

    overrides = [f"run_dir={run_dir}", f"policy.model={model_dir}", f"policy.device={device}", "tiny.build=false",
                 "sft.enabled=false", f"iterations={3 if profile else 2}", "eval.num_tasks=1",
                 "eval.episodes_per_task=1", "checkpoint_every=0", "time_budget_s=null", "log.plot=false",
                 "torch_threads=null", f"rollout.tasks_per_iter={tasks}", f"rollout.group_size={group}",
                 f"env.fresh_tasks={4 * tasks}",  # the preset's 4,000 only cost set-up time here
                 # a random model's advantages are mostly 0: train every sample, the update's cost is the point
                 "ppo.drop_abs_adv_below=0",
                 # micro-batches of ~8k tokens: the preset's 1,024 are a CPU's best, a GPU's worst
                 "ppo.micro_batch_size=64", f"ppo.micro_batch_tokens={512 if smoke else 8192}"]
    if mode == "lora":
        overrides.append("policy.lora={}")
    if smoke:
        overrides.append("env.env_kwargs={max_episode_steps: 3}")
    cfg = load_config("household-tiny", overrides)
    timer = PhaseTimer()
    make_policy = run_setup.make_policy

    def timed_policy(c, path):  # the trainer's own policy, its generation forwards timed
        policy = make_policy(c, path)
        timer.attach(policy.model)
        return policy

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    rows: list[dict] = []
    phases: list[dict] = []

    def on_iteration(m):
        rows.append(m)
        phases.append({"prefill_s": timer.prefill_s, "decode_s": timer.decode_s,
                       "prefill_tokens": timer.prefill_tokens, "decode_tokens": timer.decode_tokens})
        timer.reset()

    table: list[str] = []
    update = profiled_update(training.ppo_update, [], 3, table) if profile else training.ppo_update
    t0 = time.perf_counter()
    with mock.patch.object(training, "make_policy", timed_policy), mock.patch.object(training, "ppo_update", update):
        training.train(cfg, log=lambda *_: None, on_iteration=on_iteration)  # train() builds the policy itself
    m, ph = rows[1], phases[1]
    counts = param_counts(SHAPES[shape_name])
    flops_per_token = {"prefill": 2 * counts["body"], "decode": 2 * (counts["body"] + counts["lm_head"]),
                       # forward 2N, backward 4N with weight gradients; LoRA's frozen weights need only the
                       # input gradients (2N) and its adapters' are negligible. Model FLOPs: the update runs
                       # the last layer and the LM head at the loss positions alone (trainers/last_layer.py)
                       "update": (6 if mode == "full" else 4) * counts["body"]}
    update_s, train_tokens = m["time"]["update_s"], m["train"]["tokens"]

    def rate(tokens, seconds):
        return tokens / seconds if seconds > 0 else None

    def mfu(kind, tokens, seconds):
        return flops_per_token[kind] * tokens / seconds / (peak * 1e12) if peak and seconds > 0 else None

    return {
        "shape": shape_name, "mode": mode, "params": counts["total"], "episodes": m["rollout"]["episodes"],
        "mean_steps": m["rollout"]["mean_steps"],
        "rollout_s": m["time"]["rollout_s"], "update_s": update_s, "iteration_s": m["time"]["iteration_s"],
        **ph,
        "prefill_tokens_per_s": rate(ph["prefill_tokens"], ph["prefill_s"]),
        "decode_tokens_per_s": rate(ph["decode_tokens"], ph["decode_s"]),
        "rollout_tokens_per_s": rate(m["rollout"]["response_tokens"], m["time"]["rollout_s"]),
        "train_tokens": train_tokens, "samples": m["train"]["samples"],
        "update_tokens_per_s": rate(train_tokens, update_s),
        "mfu_prefill": mfu("prefill", ph["prefill_tokens"], ph["prefill_s"]),
        "mfu_decode": mfu("decode", ph["decode_tokens"], ph["decode_s"]),
        "mfu_update": mfu("update", train_tokens, update_s),
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "wall_s": time.perf_counter() - t0,
        **({"update_profile": table} if profile else {}),
    }


# --- the run ----------------------------------------------------------------------------------------
def print_table(result: dict) -> None:
    m = result["machine"]
    print(f"\n{m.get('card')} | driver {m.get('driver')} | torch {m['torch']} (CUDA {m['cuda']}) | "
          f"transformers {m['transformers']} | peak bf16 {m.get('peak_bf16_tflops')} TFLOP/s")
    tests = result.get("tests")
    if tests:
        failed = [n for n, r in tests.get("tests", {}).items() if r["outcome"] in ("failure", "error")]
        print(f"gpu tests: {tests.get('counts') or tests.get('error')}" + (f" failed: {failed}" if failed else ""))
    for run in result.get("main_job", []):
        mean = run["mean_after_first"]
        where = run["device"] if run["threads"] is None else f"{run['device']} ({run['threads']} threads)"
        print(f"main job RL on {where}: "
              f"{mean['iteration_s']:.2f}s/iteration = rollout {mean['rollout_s']:.2f} + score/adv "
              f"{mean['score_and_advantages_s']:.2f} + update {mean['update_s']:.2f}")
    rows = result.get("throughput", [])
    if rows:
        print(f"{'model':14} {'mode':5} {'prefill tok/s':>13} {'decode tok/s':>12} {'update tok/s':>12} "
              f"{'MFU pre/dec/upd':>17} {'peak GiB':>8}")

    def pct(x):
        return "-" if x is None else f"{100 * x:.0f}%"

    for r in rows:
        if "error" in r:
            print(f"{r['shape']:14} {r['mode']:5} {r['error']}")
            continue
        peak = "-" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.1f}"
        mfu = "/".join(pct(r[k]) for k in ("mfu_prefill", "mfu_decode", "mfu_update"))
        rates = [r[k] or 0 for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "update_tokens_per_s")]
        print(f"{r['shape']:14} {r['mode']:5} {rates[0]:13.0f} {rates[1]:12.0f} {rates[2]:12.0f} {mfu:>17} {peak:>8}")
    for note in result.get("skipped", []):
        print(f"skipped: {note}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default: cuda)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes and episodes: a CPU run in seconds")
    ap.add_argument("--parts", default="tests,main_job,throughput",
                    help="comma-separated, of tests,main_job,throughput")
    ap.add_argument("--shapes", default=None, help=f"comma-separated, of {', '.join(SHAPES)} "
                                                   f"(default: {','.join(DEFAULT_SHAPES)}; smoke with --smoke)")
    ap.add_argument("--modes", default="lora,full", help="comma-separated, of lora,full")
    ap.add_argument("--warm-start", default=str(ROOT / ".whl" / "warm_start"),
                    help="the main job's SFT warm start (scripts/gpu_wheels.sh builds it)")
    ap.add_argument("--iterations", type=int, default=3,
                    help="main job RL iterations per device (the first is a warm-up)")
    ap.add_argument("--cpu-threads", type=int, default=2,
                    help="the main job's CPU comparison: threads (0: leave it out)")
    ap.add_argument("--tasks", type=int, default=8, help="throughput: tasks per iteration")
    ap.add_argument("--group", type=int, default=8, help="throughput: episodes per task")
    ap.add_argument("--profile", default="qwen2.5-1.5b:full", metavar="SHAPE:MODE",
                    help="this throughput run profiles a third iteration's update (torch.profiler; '' for none)")
    ap.add_argument("--budget-s", type=float, default=360.0,
                    help="start no part that would not end by then (seconds from the start)")
    ap.add_argument("--out", default=str(ROOT / "out" / "gpu_check.json"), help="the JSON written")
    ap.add_argument("--prepare-warm-start", metavar="DIR", default=None,
                    help="build the main job's warm start into DIR and exit (run here, before a GPU run)")
    args = ap.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    args.shapes = (args.shapes.split(",") if args.shapes else (["smoke"] if args.smoke else DEFAULT_SHAPES))
    args.modes = [m for m in args.modes.split(",") if m]
    if args.smoke:
        args.iterations, args.tasks, args.group = min(args.iterations, 2), min(args.tasks, 2), min(args.group, 2)
    unknown = [p for p in args.parts if p not in ("tests", "main_job", "throughput")]
    if unknown:
        ap.error(f"--parts {','.join(unknown)}: choose from tests, main_job, throughput")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.prepare_warm_start:
        print(f"warm start in {prepare_warm_start(Path(args.prepare_warm_start), threads=args.cpu_threads or 1)}")
        return 0
    started = time.perf_counter()
    try:
        check_inputs(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from agentgym.trainers.run_setup import quiet_transformers

    quiet_transformers()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # the throughput runs write multi-GB models and final checkpoints: into memory where there is room
    shm = Path("/dev/shm")
    roomy = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 40 * 2**30
    work = Path(tempfile.mkdtemp(prefix="agentgym_gpu_check_", dir=shm if roomy else None))
    result: dict = {"machine": machine(args.device), "args": {k: v for k, v in vars(args).items()}, "skipped": []}

    def save() -> None:
        result["wall_s"] = time.perf_counter() - started
        out.write_text(json.dumps(result, indent=2, default=str))

    def room(what: str, needs_s: float) -> bool:  # needs_s: what an H200 took on 2026-11-27 (docs/gpu.md)
        left = args.budget_s - (time.perf_counter() - started)
        if left < needs_s:
            result["skipped"].append(f"{what}: {left:.0f}s of --budget-s left, it needs about {needs_s:.0f}s")
            save()
            return False
        return True

    save()
    if "tests" in args.parts and room("tests", 105):
        left = args.budget_s - (time.perf_counter() - started)
        result["tests"] = run_tests(out.parent, timeout_s=max(left - 30, 30))
        save()
    if "main_job" in args.parts:
        warm = Path(args.warm_start) if not args.smoke or (Path(args.warm_start) / "config.json").is_file() \
            else smoke_warm_start(work)
        result["main_job"] = []
        compare = args.cpu_threads and args.device != "cpu"  # the same warm start on this machine's CPU
        runs = [(args.device, None)] + ([("cpu", args.cpu_threads)] if compare else [])
        for device, threads in runs:
            if room(f"main job on {device}", 10 if args.smoke else 60):
                result["main_job"].append(run_main_job(device, warm, args.iterations, threads,
                                                       work / f"main_{device.replace(':', '_')}", args.smoke))
                save()
    if "throughput" in args.parts:
        tokenizer = Path(args.warm_start) if (Path(args.warm_start) / "tokenizer.json").is_file() \
            else smoke_warm_start(work)
        result["throughput"] = []
        for shape in args.shapes:
            if not room(f"throughput {shape}", 10 if args.smoke else 20):
                continue
            folder = random_model_folder(shape, tokenizer, args.device, work / f"model_{shape}")
            for mode in args.modes:
                if not room(f"throughput {shape} {mode}", 10 if args.smoke else 125):
                    continue
                try:
                    row = run_throughput(shape, mode, args.device, folder, work / f"run_{shape}_{mode}",
                                         result["machine"]["peak_bf16_tflops"], args.tasks, args.group, args.smoke,
                                         profile=args.profile == f"{shape}:{mode}")
                except Exception as exc:  # noqa: BLE001  one configuration failing (out of memory, say) is a result
                    row = {"shape": shape, "mode": mode, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
                result["throughput"].append(row)
                save()
                shutil.rmtree(work / f"run_{shape}_{mode}", ignore_errors=True)
            shutil.rmtree(folder, ignore_errors=True)
    save()
    shutil.rmtree(work, ignore_errors=True)
    print_table(result)
    print(f"\nwrote {out} ({time.perf_counter() - started:.0f}s)")
    tests = result.get("tests") or {}
    return 1 if tests.get("counts", {}).get("failure") or tests.get("counts", {}).get("error") or \
        tests.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
