#!/usr/bin/env bash
# policy.engine=pool on a lent GPU (docs/engine_speed.md), at most 8 minutes: the engine's CUDA tests, its
# decode and prefill speed on SmolLM2 and on the Qwen2.5-1.5B shape (random weights) against the card's
# bandwidth bound, then a household-smol seed on the pool engine (SFT, two held-out evaluations, the
# preset's iterations) until the time is up. The model travels as scripts/gpu_smol_files.sh prepares it
# (two halves, two calls, as scripts/gpu_smol_table.sh):
#
#   bash scripts/gpu_engine.sh stash          # call 1, carry .gpu_smol_a: keeps the first half
#   bash scripts/gpu_engine.sh run [SECS]     # call 2, carry .gpu_smol_b: joins, installs, measures (SECS: 470)
#   DEVICE=cpu SMOKE=1 INSTALL=0 MODEL=smollm2-135m-instruct PART_SECS=600 PYTHON=.venv/bin/python \
#       bash scripts/gpu_engine.sh run 1800                                  # the check of this script on a CPU
#
# MODEL skips the halves (a model name or folder this machine has). SMOKE=1 shrinks every part (a few rows
# and steps, a seed of one iteration on a few tasks). Results in $OUT (default out/): engine_speed.json
# (keys gpu and gpu_qwen2.5-1.5b_shape; cpu_smoke on a CPU), engine_tests.log, seed.log, seed.json.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-out}
stash=.gpu_stash
source scripts/gpu_install.sh
device=${DEVICE:-cuda}

case "${1:-}" in
stash) gpu_stash gpu_engine; exit 0 ;;
run) ;;
*) echo "usage: bash scripts/gpu_engine.sh stash | run [SECONDS]" >&2; exit 2 ;;
esac
budget=${2:-470}
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
# a part's seconds: its own limit (SECS, or PART_SECS for all: a shared CPU's check needs more), at most what is left
cap() { local limit=${PART_SECS:-$1}; local rest; rest=$(left); echo $(( rest < limit ? rest : limit )); }

gpu_model gpu_engine
mkdir -p "$out"
"$python" -c "
import sys, torch
from agentgym.policies.model_files import resolve_model
print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')
print('model folder', resolve_model(sys.argv[1]))" "$model"
echo "gpu_engine: ready in $(( $(date +%s) - t0 ))s"

if [ "${SMOKE:-0}" = 1 ]; then
    speed=(--rows 4 8 --eager-rows 4 --steps 4 --context 32 --prefill-rows 2)
    seed=("iterations=1" "eval.num_tasks=2" "sft.num_tasks=2" "sft.epochs=1" "rollout.tasks_per_iter=2"
          "rollout.group_size=2" "env.env_kwargs.max_episode_steps=3" "torch_threads=1")
    key=cpu_smoke
else
    speed=(--rows 16 64 256 --eager-rows 16 64 --steps 32 --context 512 --prefill-rows 64)
    seed=("eval.max_batch_episodes=234" "ppo.micro_batch_size=32" "checkpoint_every=0")
    key=gpu
fi
[ "$device" = cuda ] || key=cpu_smoke
status=0

# 1. the engine's tests on this device (CUDA graphs against the eager path); AGENTGYM_GPU_TEST_DEVICE=cpu off a card
export AGENTGYM_GPU_TEST_DEVICE=$device
timeout --signal=INT --kill-after=10 "$(cap 150)" "$python" -m pytest -q -p no:cacheprovider \
    tests/models/test_engine_cuda.py 2>&1 | tail -15 | tee "$out/engine_tests.log" || { status=$?; echo "gpu_engine: the tests stopped (exit $status)"; }

# 2. decode and prefill speed: SmolLM2, then the Qwen2.5-1.5B shape
timeout --signal=INT --kill-after=10 "$(cap 120)" "$python" benchmarks/speed/engine_speed.py \
    --model "$model" --device "$device" "${speed[@]}" --key "$key" --out "$out/engine_speed.json" 2>&1 \
    | grep -v "Loading weights" | tail -12 || { status=$?; echo "gpu_engine: SmolLM2's speed stopped (exit $status)"; }
timeout --signal=INT --kill-after=10 "$(cap 120)" "$python" benchmarks/speed/engine_speed.py \
    --model "$model" --shape qwen2.5-1.5b --device "$device" "${speed[@]}" --eager-rows --key "${key}_qwen2.5-1.5b_shape" \
    --out "$out/engine_speed.json" 2>&1 | grep -v "Loading weights" | tail -12 \
    || { status=$?; echo "gpu_engine: the Qwen2.5-1.5B shape's speed stopped (exit $status)"; }

# 3. a household-smol seed on the pool engine, for the time that is left
seed_start=$(date +%s)
seed_status=0
timeout --signal=INT --kill-after=20 "$(( $(left) > 10 ? $(left) : 10 ))" "$python" -m agentgym.cli train household-smol \
    --run-dir "$stash/seed" --overwrite "policy.model=$model" "policy.device=$device" policy.engine=pool \
    "${seed[@]}" 2>&1 | tee "$out/seed.log" | grep -E "held-out|iteration|error|Error" | tail -20 || seed_status=$?
seconds=$(( $(date +%s) - seed_start ))
"$python" - "$stash/seed" "$seconds" "$seed_status" "$out/seed.json" <<'EOF'
import json, sys
from pathlib import Path
run, seconds, status, out = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
metrics = run / "metrics.jsonl"
rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
iteration_s = [r["time/iteration_s"] for r in rows if "time/iteration_s" in r]  # metrics.jsonl's flattened keys
json.dump({"seed_seconds": seconds, "exit_status": status, "iterations_done": len(iteration_s),
           "iteration_s": iteration_s, "finished": status == 0}, out.open("w"), indent=1)
print(f"gpu_engine: the seed ran {seconds}s, {len(iteration_s)} iterations, exit {status}")
EOF
echo "gpu_engine: $(( $(date +%s) - t0 ))s in all"
ls -la "$out"
exit "$status"
