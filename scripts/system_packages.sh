#!/usr/bin/env bash
# The system packages agentgym's optional parts use: bubblewrap (the SWE sandbox) and chromium (the
# browser backend). Called by scripts/setup.sh; installs only what is missing, with apt as root.
#
# Another apt process (unattended-upgrades on a fresh machine, a second terminal) holds apt's locks
# for minutes. apt-get fails at once with rc 100 then; instead this waits up to AGENTGYM_APT_WAIT_S
# seconds (300 by default) for the lock, then says who held it and goes on without the packages: the
# tests that need them skip, and running scripts/setup.sh again installs them.
# apt-get install waits by itself (-o DPkg::Lock::Timeout); apt-get update does not (apt 2.6 ignores
# that option for the lists lock), so its attempts are repeated until the same bound.
set -uo pipefail

wait_s=${AGENTGYM_APT_WAIT_S:-300}
poll_s=${AGENTGYM_APT_POLL_S:-5}

packages=()
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
[ -x /usr/bin/chromium ] || packages+=(chromium)
[ ${#packages[@]} -gt 0 ] || exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: install ${packages[*]} with your package manager (sandbox and browser tests skip without them)" >&2
    exit 0
fi

# one line: which apt step failed and why; setup goes on (the packages are optional)
gave_up() {
    echo "setup: $1 failed: $2; ${packages[*]} not installed (the SWE sandbox and browser tests skip" \
         "without them): run scripts/setup.sh again once it is done" >&2
    exit 0
}

lock_holder() {  # "held by process 123 (apt-get)" from apt's message, or the message itself
    sed -n 's/.*\(held by process [0-9]* ([^)]*)\).*/\1/p' <<<"$1" | head -n 1
}

deadline=$(( $(date +%s) + wait_s ))
while :; do
    if out=$(apt-get update -qq 2>&1); then
        break
    fi
    if ! grep -q "Could not get lock" <<<"$out"; then
        gave_up "apt-get update" "$(tail -n 1 <<<"$out")"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        holder=$(lock_holder "$out")
        gave_up "apt-get update" "apt's lock was ${holder:-held by another process} for more than ${wait_s} s"
    fi
    sleep "$poll_s"
done

left=$(( deadline - $(date +%s) ))
[ "$left" -gt 0 ] || left=1
if ! out=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$left" install -y -qq "${packages[@]}" 2>&1 >/dev/null); then
    if grep -q "Could not get lock" <<<"$out"; then
        holder=$(lock_holder "$out")
        gave_up "apt-get install" "apt's lock was ${holder:-held by another process} for more than ${wait_s} s"
    fi
    gave_up "apt-get install" "$(tail -n 1 <<<"$out")"
fi
