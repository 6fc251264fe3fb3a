#!/usr/bin/env bash
# Here, where there is network, before a GPU run (docs/gpu.md): fill .whl/ (git-ignored) with what
# travels to the GPU machine, which has no network: the pure-Python wheels its image lacks
# (gymnasium and its one missing dependency), a setuptools new enough to install the project
# offline, and the main job's SFT warm start (.whl/warm_start). Versions are this venv's, the ones
# the tests passed with. Fails when the working tree plus .whl would pass the device's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
limit_mib=64

# The image holds torch, transformers, peft, accelerate, numpy, pyyaml, typer, rich, pytest, hypothesis,
# psutil, safetensors, tokenizers (.library/device/KINDS.md): everything else agentgym imports without extras.
version() { "$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
wheels=("gymnasium==$(version gymnasium)" "farama-notifications==$(version farama-notifications)"
        "setuptools==$(version setuptools)")
mkdir -p .whl
rm -f .whl/*.whl  # one version of each: two would stop the install there
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl "${wheels[@]}"

if [ ! -f .whl/warm_start/config.json ]; then
    if [ -n "${WARM_START:-}" ]; then  # one built before (e.g. another checkout's .whl/warm_start)
        mkdir -p .whl/warm_start && cp -r "$WARM_START"/. .whl/warm_start/
    else  # the household-tiny preset's tiny model and SFT warm start, seed 0 (CPU minutes: SFT on 1,000 tasks)
        OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$python" benchmarks/gpu/gpu_check.py --prepare-warm-start .whl/warm_start
    fi
fi

tree=$(git ls-files -co --exclude-standard -z | du --files0-from=- -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(du -sb .whl | cut -f1)
total_mib=$(( (tree + carried) / 1048576 + 1 ))
echo "gpu_wheels: $(ls .whl/*.whl | xargs -n1 basename | tr '\n' ' ')+ warm_start; the run sends about ${total_mib} MiB (limit ${limit_mib})"
if [ "$total_mib" -gt "$limit_mib" ]; then
    echo "gpu_wheels: ${total_mib} MiB is over the device's ${limit_mib} MiB: leave out untracked files or shrink .whl" >&2
    exit 1
fi
