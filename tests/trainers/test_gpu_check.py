"""The GPU check (benchmarks/gpu/gpu_check.py, docs/gpu.md) cannot rot between lendings of a GPU: its CPU
smoke run goes through every part (the gpu tests collected and skipped, the main job's RL phase,
throughput on a Qwen2-shaped model), and bad input is one line before anything loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: benchmarks.* imports
from benchmarks.gpu import gpu_check  # noqa: E402


def test_smoke_run_on_cpu_goes_through_every_part(tmp_path):
    out = tmp_path / "gpu_check.json"
    args = ["--device", "cpu", "--smoke", "--out", str(out), "--warm-start", str(tmp_path / "none")]
    assert gpu_check.main([*args, "--profile", "smoke:full"]) == 0
    result = json.loads(out.read_text())
    assert result["machine"]["device"] == "cpu" and result["skipped"] == []
    tests = result["tests"]["tests"]
    if not torch.cuda.is_available():  # collected, and every one skipped for want of CUDA
        assert len(tests) >= 5 and {t["outcome"] for t in tests.values()} == {"skipped"}, result["tests"]
    [job] = result["main_job"]  # no CPU comparison run when the device is the CPU
    assert len(job["iterations"]) == 2
    for it in job["iterations"]:
        parts = it["rollout_s"] + it["score_and_advantages_s"] + it["update_s"]
        assert it["response_tokens"] > 0 and it["train_tokens"] > 0 and parts == pytest.approx(it["iteration_s"])
    rows = {r["mode"]: r for r in result["throughput"]}
    assert set(rows) == {"lora", "full"}
    for r in rows.values():
        assert r["episodes"] == 4 and r["prefill_tokens"] > r["decode_tokens"] > 0 and r["train_tokens"] > 0
        assert r["decode_tokens_per_s"] > 0 and r["update_tokens_per_s"] > 0
        assert r["mfu_update"] is None and r["peak_memory_gib"] is None  # no card: no peak to divide by
    assert any("aten::" in line for line in rows["full"]["update_profile"]) and "update_profile" not in rows["lora"]


def test_param_counts_are_the_built_models():
    from transformers import AutoModelForCausalLM, Qwen2Config

    for shape in ("smoke", "qwen2.5-0.5b"):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(Qwen2Config(**gpu_check.SHAPES[shape]))
        assert gpu_check.param_counts(gpu_check.SHAPES[shape])["total"] == sum(p.numel() for p in model.parameters())
    assert 0.49e9 < gpu_check.param_counts(gpu_check.SHAPES["qwen2.5-0.5b"])["total"] < 0.50e9  # Qwen's 494M


def test_peaks_by_card_name():
    assert gpu_check.peak_tflops("NVIDIA H100 80GB HBM3") == gpu_check.peak_tflops("NVIDIA H200") == 989.4
    assert gpu_check.peak_tflops("NVIDIA H100 PCIe") == 756.0 and gpu_check.peak_tflops("Some GPU") is None


BAD_INPUT = [  # (arguments, what the one line says); CUDA missing only where it is
    *([(["--device", "cuda"], "--device=cuda but this machine has")] if not torch.cuda.is_available() else []),
    (["--device", "cpu", "--shapes", "qwen2.5-72b", "--modes", "full"],
     "qwen2.5-72b with full fine-tuning needs about"),
    (["--device", "cpu", "--shapes", "llama-9000"], "--shapes llama-9000: unknown"),
    (["--device", "cpu", "--parts", "main_job", "--warm-start", "/nonexistent"], "no warm start in /nonexistent"),
]


def test_bad_input_is_one_line_before_anything_loads():
    """Each case in one fresh process (one torch import for all): exit code 2, one line on stderr,
    and transformers never imported, so no model was built or loaded."""
    code = r"""
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
from benchmarks.gpu import gpu_check
rows = []
for args in json.loads(sys.argv[2]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = gpu_check.main(args)
    rows.append([rc, err.getvalue(), "transformers" in sys.modules])
print(json.dumps(rows))
"""
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT), json.dumps([a for a, _ in BAD_INPUT])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for (args, message), (rc, err, loaded) in zip(BAD_INPUT, json.loads(proc.stdout.splitlines()[-1])):
        assert rc == 2 and not loaded and len(err.strip().splitlines()) == 1 and message in err, (args, err)
