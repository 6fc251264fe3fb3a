"""Prefilled tokens per turn against the turn index, with and without KV reuse across turns.

A growing conversation (chat history "full") re-prefilled every turn costs the whole prompt each
turn, so the total grows quadratically with the number of turns; with the HF engine's per-episode
KV cache a turn prefills only the previous reply's last token and the new messages (linear in
total). Both runs play the same episodes (same seed; KV reuse changes no sampled token: tested in
tests/trainers/test_token_in_token_out.py). Writes docs/prefill_per_turn.png and .json.

Usage: python benchmarks/speed/prefill_per_turn.py [--tasks 8] [--group 2] [--turns 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness.provenance import command  # noqa: E402

import torch

import agentgym
from agentgym.policies.base import SamplingParams

ROOT = Path(__file__).resolve().parents[2]
CHAT = {"history": "full", "show_admissible": True}


def played(model_dir: Path, reuse: bool, args) -> tuple[list[list[int]], float]:
    """Prefilled tokens of every prompt, per turn (one batched generate call per turn)."""
    from agentgym.policies.hf import HFPolicy

    policy = HFPolicy(model_dir)
    policy.reuse_kv = reuse
    per_turn: list[list[int]] = []
    real = policy._sample

    def sample(prompt_ids, sampling, cache_keys=None, **options):
        out = real(prompt_ids, sampling, cache_keys, **options)
        per_turn.append(list(policy.last_prefill_tokens))
        return out

    policy._sample = sample
    tasks = agentgym.get_task_space(args.env).split("train")[: args.tasks]
    t = time.process_time()
    agentgym.collect(args.env, tasks, policy, args.group, seed=0, chat=CHAT, max_turns=args.turns,
                     sampling=SamplingParams(temperature=1.0, max_new_tokens=16, seed=0))
    return per_turn, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="agentgym/Household-v0")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=2)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--out", default=str(ROOT / "docs" / "prefill_per_turn"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.run_setup import collect_env_texts

    model_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", env_id=args.env,
                                 texts=collect_env_texts(args.env, num_tasks=32, chat=CHAT))
    with_reuse, cpu_reuse = played(model_dir, True, args)
    without, cpu_plain = played(model_dir, False, args)
    rows = [{"turn": k + 1, "prompts": len(a), "prefill_kv_reuse": statistics.mean(a),
             "prefill_no_reuse": statistics.mean(b)} for k, (a, b) in enumerate(zip(with_reuse, without))]
    report = {"command": command(__file__), "rows": rows,
              "total_prefill_kv_reuse": sum(map(sum, with_reuse)), "total_prefill_no_reuse": sum(map(sum, without)),
              "rollout_cpu_s_kv_reuse": cpu_reuse, "rollout_cpu_s_no_reuse": cpu_plain}
    for r in rows:
        print(f"turn {r['turn']:2d}: {r['prompts']:3d} prompts, prefilled tokens per prompt "
              f"{r['prefill_kv_reuse']:7.1f} (KV reuse) vs {r['prefill_no_reuse']:7.1f} (re-prefill)")
    print(f"total prefilled: {report['total_prefill_kv_reuse']} vs {report['total_prefill_no_reuse']}; "
          f"rollout CPU {cpu_reuse:.1f}s vs {cpu_plain:.1f}s")
    Path(args.out + ".json").write_text(json.dumps(report, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    turns = [r["turn"] for r in rows]
    ax.plot(turns, [r["prefill_no_reuse"] for r in rows], "o-", label="re-prefill the conversation each turn")
    ax.plot(turns, [r["prefill_kv_reuse"] for r in rows], "s-", label="KV cache kept across turns (agentgym)")
    ax.set_xlabel("turn")
    ax.set_ylabel("prefilled tokens per episode")
    ax.set_title(f"{args.env}, history=full, tiny model")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=120)
    print(f"written: {args.out}.png, {args.out}.json")


if __name__ == "__main__":
    main()
