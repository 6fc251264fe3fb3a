#!/usr/bin/env bash
# The GPU check (docs/gpu.md), on a CUDA machine with no network whose Python already holds torch,
# transformers, peft, accelerate, numpy, pyyaml, typer, rich and pytest: install what travels in
# .whl/ (scripts/gpu_wheels.sh made it here), install the project without its extras, then run
# benchmarks/gpu_check.py (arguments pass through). Results: $OUT/gpu_check.json (or out/).
#
#   bash scripts/gpu_check.sh                        # the whole check, about 6 minutes on an H100
#   bash scripts/gpu_check.sh --parts tests          # one part
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-out}
site=${GPU_CHECK_SITE:-/tmp/agentgym_site}
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1

ls .whl/*.whl >/dev/null 2>&1 || { echo "gpu_check: no wheels in .whl/: run scripts/gpu_wheels.sh where there is network, and carry .whl" >&2; exit 2; }
t0=$(date +%s)
# 1. the wheels, into a folder of their own on PYTHONPATH (the image's packages stay as they are)
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# 2. the project, editable and without extras, built offline by the setuptools that travelled (a
# plain wheel would not do: run from the repo root, its agentgym/ folder shadows an installed copy)
"$python" -m pip install -q --no-index --no-deps --no-build-isolation -e . || {
    echo "gpu_check: the editable install failed (a read-only Python?): rerun with PYTHON=<a venv that sees the image's packages>" >&2; exit 2; }
"$python" -c "import agentgym, gymnasium, agentgym.trainers.training" || { echo "gpu_check: the install does not import" >&2; exit 2; }
echo "gpu_check: installed in $(( $(date +%s) - t0 ))s"
# 3. the check (deterministic cuBLAS workspaces: the resume test compares weights bit for bit)
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
mkdir -p "$out"
exec "$python" benchmarks/gpu_check.py --out "$out/gpu_check.json" "$@"
