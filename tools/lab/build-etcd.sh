#!/usr/bin/env bash
# Builds etcd and etcdctl from Go modules, once, into the molt cache, for each version in
# LAB_ETCD_ONLY (tools/versions.env): $cache/toolchain/etcd-<version>/bin. The wrapper module
# is tools/toolchain/etcd-<X.Y.Z> when there is one, else tools/toolchain/etcd-<X.Y> (the
# Kubernetes images' etcd, built by build-kube.sh into the same place). Versions are built in
# parallel (each go build is mostly linking on one core); prints each one's build time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
command -v go >/dev/null || { echo "error: Go >= 1.26 is needed to build etcd for the lab's etcd-only images" >&2; exit 1; }

built() { [ -x "$1" ] && [ -f "$1.version" ] && [ "$(cat "$1.version")" = "$2" ]; }

# build_version vX.Y.Z
build_version() {
  local v=$1 ver=${1#v} dir out start c
  dir="$here/toolchain/etcd-$ver"
  [ -d "$dir" ] || dir="$here/toolchain/etcd-${ver%.*}"
  grep -q "go.etcd.io/etcd/server/v3 $v\$" "$dir/go.mod" ||
    { echo "error: $dir/go.mod does not pin etcd $v; add tools/toolchain/etcd-$ver" >&2; return 1; }
  for c in etcd etcdctl; do
    out="$cache/toolchain/etcd-$v/bin/$c"
    if built "$out" "$v"; then echo "cached: $out ($v)"; continue; fi
    mkdir -p "$(dirname "$out")"
    start=$(date +%s)
    (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp" "./cmd/$c")
    mv "$out.tmp" "$out"
    echo "$v" > "$out.version"
    echo "built: $out ($v) in $(( $(date +%s) - start ))s"
  done
}

pids=()
for v in $LAB_ETCD_ONLY; do
  build_version "$v" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
