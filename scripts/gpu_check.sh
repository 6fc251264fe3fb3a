#!/usr/bin/env bash
# The GPU check (docs/gpu.md), on a CUDA machine with no network whose Python already holds torch,
# transformers, peft, accelerate, numpy, pyyaml, typer, rich and pytest: install what travels in
# .whl/ (scripts/gpu_wheels.sh made it here), install the project without its extras, then run
# benchmarks/gpu/gpu_check.py (arguments pass through). Results: $OUT/gpu_check.json (or out/).
#
#   bash scripts/gpu_check.sh                        # the whole check, about 6 minutes on an H100
#   bash scripts/gpu_check.sh --parts tests          # one part
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-out}
export GPU_SITE=${GPU_CHECK_SITE:-/tmp/agentgym_site}
source scripts/gpu_install.sh
t0=$(date +%s)
gpu_install gpu_check .whl
echo "gpu_check: installed in $(( $(date +%s) - t0 ))s"
# then the check (deterministic cuBLAS workspaces: the resume test compares weights bit for bit)
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
mkdir -p "$out"
exec "$python" benchmarks/gpu/gpu_check.py --out "$out/gpu_check.json" "$@"
