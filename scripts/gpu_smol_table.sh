#!/usr/bin/env bash
# The real-model RL table (benchmarks/learning/real_llm_rl.py: household-smol, GiGPO vs RFT, seeds 0-2) on a lent
# GPU, whose image holds torch, transformers and peft but has no network. scripts/gpu_smol_files.sh
# prepares, here, what travels: the model's GGUF file in two halves (one device call carries at most
# 64 MiB), each with the wheels. Two calls, back to back (a warm machine keeps the repo's ignored
# files between calls, for about 30 s):
#
#   bash scripts/gpu_smol_table.sh stash        # call 1, carry .gpu_smol_a: keeps the first half
#   bash scripts/gpu_smol_table.sh run [SECS]   # call 2, carry .gpu_smol_b: joins, checks, installs, runs
#   bash scripts/gpu_smol_table.sh zeroshot [SECS]   # or call 2: the rollout's profile on the card
#                                                    # (benchmarks/gpu/gpu_rollout_profile.py), then the zero-shot rows
#   bash scripts/gpu_smol_table.sh verdict [SECS]    # or call 2: docs/verdict.md's smol jobs not done yet
#
# `verdict` restores the finished jobs from docs/verdict.json, checks the pool engine's CUDA path
# (tests/models/test_engine_cuda.py; the default engine if it fails), then runs the remaining jobs
# PARALLEL (8) at a time until SECS. $OUT/verdict.json holds every finished job, the old and the
# new: copy it over docs/verdict.json. A job cut off by SECS is lost with the machine, so run it
# with most of a session's device time. MODEL (a model name or folder this machine has) skips the
# halves: `DEVICE=cpu SMOKE=1 INSTALL=0 MODEL=smollm2-135m-instruct PYTHON=.venv/bin/python bash
# scripts/gpu_smol_table.sh verdict 1800` is the check of this mode on a CPU.
#
# `run` converts the GGUF once (policies/model_catalog.py), then runs the table's jobs three at a time
# (rl/seedN; rft/seedN as soon as rl/seedN lands), stopping at SECS (default 470) wherever they are.
# It copies into $OUT the table (real_llm_gpu.json: real_llm_rl.py's "rl_table" of the runs that
# finished), the log, and the runs' text files (metrics, results, evaluations) as one archive.
# INSTALL=0 skips installing the project (already installed); SMOKE=1 shrinks every run to one iteration on a few tasks (the check of this script on a CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-out}
stash=.gpu_stash
source scripts/gpu_install.sh

case "${1:-}" in
stash) gpu_stash gpu_smol_table; exit 0 ;;
run|zeroshot|verdict) ;;
*) echo "usage: bash scripts/gpu_smol_table.sh stash | run [SECONDS] | zeroshot [SECONDS] | verdict [SECONDS]" >&2; exit 2 ;;
esac
budget=${2:-470}
t0=$(date +%s)

gpu_model gpu_smol_table
mkdir -p "$out"
"$python" -c "
import sys, torch, transformers
from agentgym.policies.model_catalog import resolve_named_model
print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')
print('model folder', resolve_named_model(sys.argv[1]))" "$model"
echo "gpu_smol_table: ready in $(( $(date +%s) - t0 ))s"

device=${DEVICE:-cuda}
if [ "$1" = verdict ]; then
    engine=()
    if [ "$device" = cuda ]; then
        # the setting decodes on policy.engine=pool; its CUDA graphs are checked against the eager path first
        AGENTGYM_GPU_TEST_DEVICE=cuda timeout --signal=INT --kill-after=10 150 "$python" -m pytest -q -p no:cacheprovider \
            tests/models/test_engine_cuda.py 2>&1 | tail -5 | tee "$out/engine_tests.log" \
            || { engine=("policy.engine=hf")
                 echo "gpu_smol_table: the pool engine's CUDA tests failed: the default engine decodes"; }
    fi
    vargs=(--setting smol --parallel "${PARALLEL:-8}")
    overrides=("policy.model=$model" "policy.device=$device" "${engine[@]}")
    # on a card, speed only, the same math: every held-out episode in one batch, 32 samples a micro-batch
    # (on a CPU the preset's own sizes: 32 samples of 30 layers took 12 GB)
    [ "$device" != cuda ] || overrides+=("eval.max_batch_episodes=234" "ppo.micro_batch_size=32")
    if [ "${SMOKE:-0}" = 1 ]; then
        # groups of 4 episodes of 6 steps: some succeed and some fail, so GiGPO makes steps the imitation arms match
        vargs+=(--seeds 0 --tune-seed 9 --val-tasks 2 --grid gigpo=1e-4 grpo=1e-4 rft=3e-4 sft=3e-4)
        overrides+=("iterations=2" "eval.num_tasks=2" "sft.num_tasks=4" "sft.epochs=1" "rollout.tasks_per_iter=2"
                    "rollout.group_size=4" "env.env_kwargs.max_episode_steps=6")
        runs=$stash/verdict_smol_smoke
        rm -rf "$runs"
        results=$out/verdict_smoke.json
    else
        runs=$stash/verdict_smol  # kept while the machine stays warm: a second call resumes its jobs
        results=$out/verdict.json
        cp docs/verdict.json "$results"  # the finished jobs, restored into the new runs folder
    fi
    status=0
    timeout --signal=INT --kill-after=30 "$(( budget - ($(date +%s) - t0) ))" "$python" benchmarks/learning/verdict.py \
        "${vargs[@]}" --runs "$runs" --out "$results" -- "${overrides[@]}" 2>&1 \
        | tee "$out/verdict_smol.log" || status=$?
    echo "gpu_smol_table: the verdict's jobs ran $(( $(date +%s) - t0 ))s in all, exit $status"
    (cd "$runs" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.log' -o -name '*.yaml' \) \
        -not -path '*/checkpoints/*' -not -path '*_model/*' -print0 | tar --null -czf "$out/verdict_runs_text.tgz" -T -)
    ls -la "$out"
    exit "$status"
fi
if [ "$1" = zeroshot ]; then
    # each family on its own, so one that cannot run here (a package the image lacks) leaves the others;
    # every held-out episode of a cell in one batch (--chunk)
    families=${FAMILIES:-household searchqa tooluse briefing webshop}
    status=0
    # first, where the rollout's time goes on the card: one process, the preset's rollout, profiled
    if [ "${PROFILE:-1}" = 1 ]; then
        timeout --signal=INT --kill-after=10 "${PROFILE_SECS:-150}" "$python" benchmarks/gpu/gpu_rollout_profile.py \
            --model "$model" --device "$device" ${PROFILE_ARGS:-} --out "$out/gpu_rollout_profile.json" \
            2>&1 | tail -40 | tee "$out/gpu_rollout_profile.log" || echo "gpu_smol_table: the profile stopped"
    fi
    for family in $families; do
        left=$(( budget - ($(date +%s) - t0) ))
        [ "$left" -gt 20 ] || { echo "gpu_smol_table: no time left for $family"; break; }
        timeout --signal=INT --kill-after=10 "$left" "$python" benchmarks/learning/zero_shot.py --model "$model" \
            --device "$device" --envs "$family" --modes free,admissible --tasks "${TASKS:-50}" --chunk "${TASKS:-50}" \
            ${ZERO_SHOT_ARGS:-} --out "$out/zero_shot.json" --work "$stash/zero_shot" 2>&1 | tee -a "$out/zero_shot.log" \
            || { status=$?; echo "gpu_smol_table: $family stopped (exit $status)"; }
    done
    "$python" benchmarks/learning/zero_shot.py --report --out "$out/zero_shot.json" || true
    exit "$status"
fi
runs=$stash/runs
rm -rf "$runs"
overrides=("policy.model=$model" "policy.device=$device"
           # speed only, the same math: the card takes every held-out episode in one batch and 32
           # samples a micro-batch (gradient accumulation sums the same terms)
           "eval.max_batch_episodes=234" "ppo.micro_batch_size=32")
if [ "${SMOKE:-0}" = 1 ]; then
    overrides+=("iterations=1" "eval.num_tasks=4" "sft.num_tasks=2" "sft.epochs=1" "rollout.tasks_per_iter=2"
                "rollout.group_size=2" "env.env_kwargs.max_episode_steps=6")
fi
status=0
timeout --signal=INT --kill-after=20 "$budget" "$python" benchmarks/learning/real_llm_rl.py --seeds ${SEEDS:-0 1 2} \
    --parallel "${PARALLEL:-3}" --runs "$runs" --out "$out/real_llm_gpu.json" -- "${overrides[@]}" \
    2>&1 | tee "$out/gpu_smol_table.log" || status=$?
echo "gpu_smol_table: the table's jobs ran $(( $(date +%s) - t0 ))s in all, exit $status"
# what the runs wrote, without weights: metrics, results, evaluations, logs
(cd "$runs" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.log' -o -name '*.yaml' \) \
    -not -path '*/checkpoints/*' -not -path '*_model/*' -print0 | tar --null -czf "$out/runs_text.tgz" -T -)
ls -la "$out"
exit "$status"
