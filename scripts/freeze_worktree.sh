#!/usr/bin/env bash
# A frozen copy of the code for a long experiment, so that development cannot change it half-way:
#
#   bash scripts/freeze_worktree.sh DIR [COMMIT]       # COMMIT: default HEAD
#   cd DIR && PYTHONPATH=DIR .venv-python benchmarks/learning/verdict.py ...
#
# A git worktree of COMMIT at DIR, whose agentgym/ also holds the subpackages (envs, policies,
# trainers, tasks) as links to the worktree's own folders. Why the links: the editable install maps
# agentgym.trainers etc. to the live checkout's folders, and a benchmark that puts the repository
# root first on sys.path finds DIR/agentgym, which has no such subfolders, so without the links
# those imports would fall through to the live checkout. The last line printed checks where each
# package is imported from.
set -euo pipefail
dir=${1:?usage: bash scripts/freeze_worktree.sh DIR [COMMIT]}
commit=${2:-HEAD}
python=${PYTHON:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${python:-$repo/.venv/bin/python}
[ -e "$dir" ] && { echo "freeze_worktree: $dir exists: choose a new folder" >&2; exit 2; }
git -C "$repo" worktree add --detach "$dir" "$commit" >/dev/null
dir=$(cd "$dir" && pwd)
for sub in envs policies trainers tasks; do
    ln -s "../$sub" "$dir/agentgym/$sub"
done
cd "$dir"
PYTHONPATH="$dir" "$python" - "$dir" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])  # as a benchmark does: the repository root first
import agentgym, agentgym.envs, agentgym.policies, agentgym.tasks, agentgym.trainers
outside = [m.__name__ for m in (agentgym, agentgym.envs, agentgym.policies, agentgym.tasks, agentgym.trainers)
           if not m.__file__.startswith(sys.argv[1] + "/")]
if outside:
    sys.exit(f"freeze_worktree: {', '.join(outside)} imported from outside {sys.argv[1]}")
print(f"freeze_worktree: {sys.argv[1]} at {__import__('subprocess').run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}; run with PYTHONPATH={sys.argv[1]}")
EOF
