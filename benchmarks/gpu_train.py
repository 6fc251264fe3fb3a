"""GPU training throughput: a bf16 CUDA RL run of a >= 50M-parameter model on household.

The model is built like the tiny model (tokenizer trained on household text, Llama config,
random init) but larger; it is briefly SFT'd on oracle trajectories so rollouts are not
pure noise, then trained with GiGPO for a few iterations. Printed per run:

    parameters, rollout tokens/s (generated tokens / rollout wall time), training tokens/s
    (tokens through forward+backward / update wall time), peak GPU memory.

    python benchmarks/gpu_train.py              # CUDA, bf16, ~75M parameters
    python benchmarks/gpu_train.py --quick      # CPU-friendly smoke run of the same code path
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny model, 1 iteration (runs on CPU)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--out", default=None, help="run dir (default: a temporary folder)")
    args = ap.parse_args()

    import torch

    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.config import load_config
    from agentgym.trainers.training import train

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.quick:
        args.hidden, args.layers, args.heads, args.iterations = 128, 2, 4, 1
    out = Path(args.out or tempfile.mkdtemp(prefix="agentgym_gpu_train_"))
    chat = {"parser": "raw", "history": 1, "system_prompt": "You are a household agent. Reply with one action."}
    t0 = time.perf_counter()
    model_dir = build_tiny_model(out / "model", vocab_size=1000, hidden=args.hidden, layers=args.layers,
                                 heads=args.heads, chat=chat, num_tasks=32)
    info = json.loads((model_dir / "agentgym_tiny.json").read_text())
    build_s = time.perf_counter() - t0
    overrides = [
        f"policy.model={model_dir}", f"policy.device={device}", f"run_dir={out / 'run'}",
        f"iterations={args.iterations}", "eval.every=0", "eval.num_tasks=8" if args.quick else "eval.num_tasks=34",
        "sft.enabled=true", "tiny.build=false", "checkpoint_every=0", "time_budget_s=null", "log.plot=false",
        f"sft.epochs={1 if args.quick else 3}", f"sft.num_tasks={16 if args.quick else 200}",
        f"rollout.tasks_per_iter={2 if args.quick else 16}", f"rollout.group_size={2 if args.quick else 8}",
        "ppo.micro_batch_size=64" if device == "cuda" else "ppo.micro_batch_size=16",
        "ppo.minibatch_size=256", "torch_threads=null" if device == "cuda" else "torch_threads=1",
    ]
    cfg = load_config("household-tiny", overrides)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    iters: list[dict] = []
    summary = train(cfg, log=lambda s: print(s, flush=True), on_iteration=iters.append)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    rollout_tokens = sum(m["rollout"]["response_tokens"] for m in iters)
    rollout_s = sum(m["time"]["rollout_s"] for m in iters)
    train_tokens = sum(m["train"]["tokens"] for m in iters)
    update_s = sum(m["time"]["update_s"] for m in iters)
    dtype = "bf16" if device.startswith("cuda") else "fp32"
    print()
    print(f"device {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), dtype {dtype}, "
          f"model {info['params'] / 1e6:.1f}M parameters (hidden {args.hidden}, {args.layers} layers), "
          f"built in {build_s:.0f}s")
    print(f"rollout: {rollout_tokens} generated tokens in {rollout_s:.1f}s = {rollout_tokens / max(rollout_s, 1e-9):.0f} tokens/s")
    print(f"training: {train_tokens} tokens in {update_s:.1f}s = {train_tokens / max(update_s, 1e-9):.0f} tokens/s")
    print(f"peak GPU memory: {peak:.2f} GiB")
    print(f"held-out success {summary['heldout_success_before']:.3f} -> {summary['heldout_success_after']:.3f} "
          f"after {summary['iterations']} iterations ({summary['wall_seconds']:.0f}s)")


if __name__ == "__main__":
    main()
