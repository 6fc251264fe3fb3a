# Sourced by the scripts that run on a lent GPU (gpu_check.sh, gpu_smol_table.sh): the install they
# share, on a machine with no network whose Python already holds torch, transformers and peft.
#
#   source scripts/gpu_install.sh
#   gpu_install NAME WHEEL_DIR     # NAME prefixes its messages; PYTHON, GPU_SITE and INSTALL as below
#
# 1. the wheels of WHEEL_DIR go into a folder of their own ($GPU_SITE, default /tmp/agentgym_site),
#    put first on PYTHONPATH: the image's packages stay as they are;
# 2. unless INSTALL=0 (the project is installed already: the check of a script on a CPU), the project,
#    editable and without extras, built offline by the setuptools that travelled (a plain wheel would
#    not do: run from the repo root, its agentgym/ folder shadows an installed copy);
# 3. a check that it imports. Each failure is one line on stderr and exit status 2.
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1

gpu_install() {
    local name=$1 wheels=$2 python=${PYTHON:-python3} site=${GPU_SITE:-/tmp/agentgym_site}
    ls "$wheels"/*.whl >/dev/null 2>&1 || {
        echo "$name: no wheels in $wheels/: make them where there is network (scripts/gpu_wheels.sh, scripts/gpu_smol_files.sh) and carry the folder" >&2; exit 2; }
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    if [ "${INSTALL:-1}" = 1 ]; then
        "$python" -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null || {
            echo "$name: the editable install failed (a read-only Python?): rerun with PYTHON=<a venv that sees the image's packages>" >&2; exit 2; }
    fi
    "$python" -c "import agentgym, gymnasium, agentgym.trainers.training" || { echo "$name: the install does not import" >&2; exit 2; }
}
