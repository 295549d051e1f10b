#!/usr/bin/env bash
# Removes every trace of one lab from this host: its machines' processes and namespaces,
# its HAProxy, its bridge and its directory (with the claim naming the stack that owned it).
# For labs whose stack is gone or broken; a stack that still exists should be destroyed
# through molt/Pulumi instead.
# Usage: tools/lab/clean.sh LAB_NAME [BRIDGE]
set -euo pipefail
lab=${1:?usage: clean.sh LAB_NAME [BRIDGE]}
bridge=${2:-}
root=${MOLT_LAB_ROOT:-/var/lib/molt-lab}
# The lab's claim (infra/lab/owner.ts) goes with it: say whose it was.
if [ -f "$root/labs/$lab/owner.json" ]; then
  echo "lab $lab was claimed by: $(tr -d '\n' <"$root/labs/$lab/owner.json")"
fi
for ns in $(ip netns list | awk '{ print $1 }' | grep "^molt-$lab-" || true); do
  pids=$(ip netns pids "$ns" || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
  fi
  ip netns del "$ns"
  echo "removed machine namespace $ns"
done
if [ -f "$root/labs/$lab/lb/haproxy.pid" ]; then
  kill "$(head -n1 "$root/labs/$lab/lb/haproxy.pid")" 2>/dev/null || true
fi
pkill -f "$root/labs/$lab/lb/haproxy.cfg" 2>/dev/null || true
if [ -n "$bridge" ] && ip link show "$bridge" >/dev/null 2>&1; then
  ip link del "$bridge"
  echo "removed bridge $bridge"
fi
rm -rf "${root:?}/labs/${lab:?}"
echo "lab $lab cleaned"
