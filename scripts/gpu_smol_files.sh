#!/usr/bin/env bash
# Here, where there is network, before the real-model RL table runs on a lent GPU
# (scripts/gpu_smol_table.sh, docs/real_llm.md): fill the git-ignored .gpu_smol_a/ and .gpu_smol_b/
# with what the GPU machine (no network) needs and its image lacks. The model's GGUF file (98 MB) is
# more than one device call may carry (64 MiB with the working tree), so it travels in two halves,
# one per call, with its sha256; the pure-Python wheels (gymnasium and its one missing dependency,
# gguf for the GGUF reader, setuptools to install the project offline) travel with each half.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
limit_mib=64

gguf=$("$python" -c "from agentgym.policies.model_catalog import CATALOG, catalog_file
print(catalog_file(CATALOG['smollm2-135m-instruct']))")
version() { "$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
wheels=("gymnasium==$(version gymnasium)" "farama-notifications==$(version farama-notifications)"
        "setuptools==$(version setuptools)" "gguf==$(version gguf)")

rm -rf .gpu_smol_a .gpu_smol_b
mkdir -p .gpu_smol_a/wheels .gpu_smol_b/wheels
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d .gpu_smol_a/wheels "${wheels[@]}"
cp .gpu_smol_a/wheels/*.whl .gpu_smol_b/wheels/
half=$(( ($(stat -c %s "$gguf") + 1) / 2 ))
head -c "$half" "$gguf" > .gpu_smol_a/part
tail -c +"$(( half + 1 ))" "$gguf" > .gpu_smol_b/part
sha=$(sha256sum "$gguf" | cut -d' ' -f1)
for d in .gpu_smol_a .gpu_smol_b; do echo "$sha  $(basename "$gguf")" > "$d/sha256"; done

tree=$(git ls-files -co --exclude-standard -z | du --files0-from=- -cb 2>/dev/null | tail -1 | cut -f1)
for d in .gpu_smol_a .gpu_smol_b; do
    mib=$(( (tree + $(du -sb "$d" | cut -f1)) / 1048576 + 1 ))
    echo "gpu_smol_files: a call carrying $d sends about ${mib} MiB (limit ${limit_mib})"
    [ "$mib" -le "$limit_mib" ] || { echo "gpu_smol_files: $d is over the limit: leave out untracked files" >&2; exit 1; }
done
