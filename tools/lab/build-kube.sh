#!/usr/bin/env bash
# Builds the lab's Kubernetes binaries from Go modules, once, into the molt cache:
#   kubernetes-<v>/bin: kube-apiserver, kube-controller-manager, kube-scheduler, kubeadm
#   etcd-<v>/bin:       etcd, etcdctl
#   lab-kubelet-<hash>/bin: lab-kubelet (tools/lab/kubelet; the hash is of its source)
# for every minor in LAB_KUBE_MINORS (tools/versions.env), or for the minors given as arguments
# (build-images.sh --chain: LAB_KUBE_CHAIN_MINORS). A binary already built at the right version
# is reused. Prints one line per binary with its build time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
command -v go >/dev/null || { echo "error: Go >= 1.26 is needed to build the lab's Kubernetes binaries" >&2; exit 1; }

built() { [ -x "$1" ] && [ -f "$1.version" ] && [ "$(cat "$1.version")" = "$2" ]; }
# build OUT STAMP DIR PACKAGE LDFLAGS
build() {
  local out=$1 stamp=$2 dir=$3 pkg=$4 ld=$5 start
  if built "$out" "$stamp"; then echo "cached: $out ($stamp)"; return; fi
  mkdir -p "$(dirname "$out")"
  start=$(date +%s)
  (cd "$dir" && go build -trimpath -ldflags "-s -w $ld" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  echo "$stamp" > "$out.version"
  echo "built: $out ($stamp) in $(( $(date +%s) - start ))s"
}

minors=("$@")
[ $# -gt 0 ] || read -ra minors <<<"$LAB_KUBE_MINORS"
for minor in "${minors[@]}"; do
  key=${minor//./_}
  kv=$(eval echo "\$LAB_KUBE_$key")
  ev=$(eval echo "\$LAB_ETCD_$key")
  major=${kv#v}; major=${major%%.*}
  emin=${ev#v}; emin=${emin%.*}
  ld=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$kv -X $p.gitMajor=$major -X $p.gitMinor=${minor#*.} -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for c in kube-apiserver kube-controller-manager kube-scheduler kubeadm; do
    build "$cache/toolchain/kubernetes-$kv/bin/$c" "$kv" "$here/toolchain/kubernetes-$minor" "k8s.io/kubernetes/cmd/$c" "$ld"
  done
  for c in etcd etcdctl; do
    build "$cache/toolchain/etcd-$ev/bin/$c" "$ev" "$here/toolchain/etcd-$emin" "./cmd/$c" ""
  done
done
src=$(cat "$here/lab/kubelet/go.mod" "$here/lab/kubelet/go.sum" "$here/lab/kubelet/main.go" | sha256sum | cut -c1-12)
build "$cache/toolchain/lab-kubelet-$src/bin/lab-kubelet" "$src" "$here/lab/kubelet" "." ""
ln -sfn "lab-kubelet-$src" "$cache/toolchain/lab-kubelet-current"
