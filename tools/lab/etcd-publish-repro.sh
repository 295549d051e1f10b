#!/usr/bin/env bash
# Minimal reproduction of the ~7 s a new etcd member (3.6+) waits before it serves clients when
# it catches up from a snapshot: on the host, no lab, plain etcd binaries and default timeouts.
# A one-member cluster gets WRITES puts, a learner is added and started, and its log says when
# it knew the leader, received and applied the snapshot, and published itself (see
# docs/benchmarks.md, "The new etcd member's 7 s"). Run it under the lab lock:
#   flock /tmp/molt-lab.lock tools/lab/etcd-publish-repro.sh [WRITES] [ETCD_BIN_DIR]
# etcd 3.6+ snapshots its raft log in memory every 100 applied entries and compacts it, so past
# about 100 writes the learner catches up from a snapshot the leader cuts at its applied index;
# when that snapshot already holds the learner's own publish entry, the learner's first publish
# times out after the request timeout (5 s + 2 x election timeout = 7 s). Past 5,000 writes its
# retries then fail with "too many requests" until the cluster applies a new entry (the script
# puts one after 12 s). Prints the learner's log lines, UTC. KEEP=1 keeps the data and logs.
set -euo pipefail
writes=${1:-6000}
bin=${2:-/var/lib/molt-lab/images/k8s-v1.37.2/bin}
dir=$(mktemp -d /tmp/etcd-publish-repro.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
a_client=http://127.0.0.1:23791 a_peer=http://127.0.0.1:23801
b_client=http://127.0.0.1:23792 b_peer=http://127.0.0.1:23802
"$bin/etcd" --name a --data-dir "$dir/a" --listen-client-urls "$a_client" --advertise-client-urls "$a_client" \
  --listen-peer-urls "$a_peer" --initial-advertise-peer-urls "$a_peer" --initial-cluster "a=$a_peer" \
  --initial-cluster-state new >"$dir/a.log" 2>&1 &
pids+=($!)
ctl() { "$bin/etcdctl" --endpoints="$a_client" "$@"; }
for _ in $(seq 100); do ctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
# shellcheck disable=SC2016 # JavaScript, not shell
# WRITES puts over one keep-alive connection (the JSON gateway), 16 at a time.
node -e '
const [url, n] = [process.argv[1], Number(process.argv[2])];
let next = 0;
const one = async () => {
  for (let i = next++; i < n; i = next++) {
    const key = Buffer.from(`/repro/${i}`).toString("base64"), value = Buffer.from("x".repeat(100)).toString("base64");
    const r = await fetch(url + "/v3/kv/put", { method: "POST", body: JSON.stringify({ key, value }) });
    if (!r.ok) throw new Error(`put ${i}: ${r.status}`);
    await r.arrayBuffer();
  }
};
Promise.all(Array.from({ length: 16 }, one)).catch((e) => { console.error(e); process.exit(1); });
' "$a_client" "$writes"
index() { ctl endpoint status -w json | grep -oE '"raft_?[iI]ndex":[0-9]+' | head -1 | cut -d: -f2; }
echo "wrote $writes keys; the leader's raft index before the learner is added: $(index)"
t_add=$(date +%s.%N)
ctl member add b --learner --peer-urls="$b_peer" >/dev/null
"$bin/etcd" --name b --data-dir "$dir/b" --listen-client-urls "$b_client" --advertise-client-urls "$b_client" \
  --listen-peer-urls "$b_peer" --initial-advertise-peer-urls "$b_peer" --initial-cluster "a=$a_peer,b=$b_peer" \
  --initial-cluster-state existing >"$dir/b.log" 2>&1 &
pids+=($!)
# The leader's view 1 s later: the learner's name and client URL are set once its publish
# entry is applied on the leader.
sleep 1
echo "1 s after the learner started: leader's raft index $(index); the learner as the leader lists it: $(ctl member list | grep -E ', b, |, , ' || true)"
published() { grep -q '"published local member to cluster through raft"' "$dir/b.log"; }
for _ in $(seq 120); do published && break; sleep 0.1; done
if ! published; then
  # With more than 5,000 entries behind it the learner's retries fail at once ("too many
  # requests": its applied index counts only entries, not the snapshot) until it applies an
  # entry: an idle cluster leaves it there. One write lets it through.
  echo "not published 12 s after start; one put on the leader at $(date -u +%H:%M:%S.%3N) UTC"
  ctl put /repro/nudge x >/dev/null
  for _ in $(seq 100); do published && break; sleep 0.1; done
fi
echo "learner added at $(date -u -d "@$t_add" +%H:%M:%S.%3N) UTC; the learner's log (UTC; repeats counted):"
# shellcheck disable=SC2016 # JavaScript, not shell
node -e '
const want = /^(starting an etcd server|became follower at term|elected leader|received and saved database snapshot|applying snapshot|applied snapshot|raft applied incoming snapshot|failed to publish local member to cluster through raft|published local member to cluster through raft|ready to serve client requests|set the cluster version)/;
let last, n = 0;
const flush = () => last && console.log(`  ${last}${n > 1 ? ` (x${n})` : ""}`);
for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
  let e;
  try { e = JSON.parse(line); } catch { continue; }
  if (!want.test(e.msg)) continue;
  const extra = e.error ?? e["incoming-snapshot-index"] ?? e["snapshot-index"] ?? "";
  const text = `${new Date(e.ts).toISOString().slice(11, 23)}  ${e.msg}${extra !== "" ? `  [${extra}]` : ""}`;
  const key = e.msg + extra;
  if (key === last?.key) { n++; continue; }
  flush(); last = Object.assign(new String(text), { key }); n = 1;
}
flush();
' "$dir/b.log"
