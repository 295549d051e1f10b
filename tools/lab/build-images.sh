#!/usr/bin/env bash
# Builds the lab's machine images: versioned, read-only directories a lab machine boots
# from (its /usr/local/bin and /etc/os-release). An image, once built, is never changed;
# a different content means a different image name.
#   lab-v1      Debian etcd 3.4.23, "molt lab OS 1"
#   lab-v2      same etcd, "molt lab OS 2"  (a base-image rollout: v1 -> v2)
#   lab-broken  an etcd that never starts     (rollback tests)
#   lab-nossh   an sshd that never starts      (a machine that boots but is never reachable)
#   k8s-<version> Kubernetes <version> (kube-apiserver, kube-controller-manager, kube-scheduler,
#               kubeadm, lab-kubelet) with the etcd its kubeadm deploys, for each minor in
#               LAB_KUBE_MINORS (k8s-v1.36.3, k8s-v1.37.2), and the newest once more on
#               "OS 2" (k8s-v1.37.2-os2), built from Go modules by tools/lab/build-kube.sh
#   --chain: also k8s-<version> of each minor in LAB_KUBE_CHAIN_MINORS (k8s-v1.35.4), the
#               chained upgrade's first minor (npm run test:long; test/long/chain.test.ts)
#   etcd-<version> etcd only, at each version of LAB_ETCD_ONLY (etcd-v3.5.11, etcd-v3.5.35,
#               etcd-v3.6.16), built from Go modules by tools/lab/build-etcd.sh: foreign
#               clusters to adopt, and etcd's 3.5 -> 3.6 patch rule on real binaries.
#               MOLT_LAB_ETCD_ONLY=0 skips them.
set -euo pipefail
root=${MOLT_LAB_ROOT:-/var/lib/molt-lab}
images="$root/images"
mkdir -p "$images"

etcd_bin=$(command -v etcd || true)
etcdctl_bin=$(command -v etcdctl || true)
if [ -z "$etcd_bin" ] || [ -z "$etcdctl_bin" ]; then
  echo "error: etcd/etcdctl not found; install the Debian packages etcd-server and etcd-client" >&2
  exit 1
fi
etcd_version=$("$etcd_bin" --version | awk '/^etcd Version:/ { print $3 }')

# os_release DIR OS_VERSION PRETTY_SUFFIX: the image's /etc/os-release
os_release() {
  cat > "$1/etc/os-release" <<OS
PRETTY_NAME="molt lab OS $2$3"
NAME="molt lab OS"
VERSION_ID="$2"
ID=molt-lab
OS
}

# build NAME OS_VERSION ETCD_MODE
build() {
  local name=$1 os=$2 mode=$3 dir="$images/$1" tmp
  if [ -f "$dir/image.json" ]; then
    echo "$name: present"
    return
  fi
  tmp=$(mktemp -d "$images/.$name.XXXXXX")
  mkdir -p "$tmp/bin" "$tmp/etc"
  if [ "$mode" = broken ]; then
    printf '#!/bin/sh\necho "etcd: this image is broken on purpose" >&2\nexit 1\n' > "$tmp/bin/etcd"
    chmod 755 "$tmp/bin/etcd"
  else
    cp "$etcd_bin" "$tmp/bin/etcd"
  fi
  if [ "$mode" = nossh ]; then
    # The image's own sshd (lab machines use the image's when it has one) fails at boot.
    printf '#!/bin/sh\necho "sshd: this image is broken on purpose" >&2\nexit 255\n' > "$tmp/bin/sshd"
    chmod 755 "$tmp/bin/sshd"
  fi
  cp "$etcdctl_bin" "$tmp/bin/etcdctl"
  os_release "$tmp" "$os" ""
  cat > "$tmp/image.json" <<JSON
{"name": "$name", "os": "molt lab OS $os", "etcdVersion": "$etcd_version", "broken": $([ "$mode" = ok ] && echo false || echo true)}
JSON
  chmod -R a-w "$tmp"
  mv "$tmp" "$dir"
  echo "$name: built (etcd $etcd_version)"
}

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}

# build_kube MINOR [OS]: an image with real Kubernetes binaries (no kubelet: lab-kubelet
# runs kubeadm's static pods as processes and keeps the Node object). OS 2 gives the same
# Kubernetes on a new base image (k8s-<version>-os2): a base-image-only rollout.
build_kube() {
  local minor=$1 os=${2:-1} key kv ev name dir tmp kubelet kubelet_version
  key=${minor//./_}
  kv=$(eval echo "\$LAB_KUBE_$key")
  ev=$(eval echo "\$LAB_ETCD_$key")
  name="k8s-$kv"
  [ "$os" = 1 ] || name="$name-os$os"
  dir="$images/$name"
  kubelet="$cache/toolchain/lab-kubelet-current/bin/lab-kubelet"
  kubelet_version=$(cat "$kubelet.version" 2>/dev/null || true)
  # lab-kubelet is the lab's host tooling, not part of the "OS": an image whose agent is
  # older is rebuilt under the same name (running machines keep the files they mounted).
  if [ -f "$dir/image.json" ] && grep -q "\"labKubelet\": \"$kubelet_version\"" "$dir/image.json"; then
    echo "$name: present"
    return
  fi
  for f in "$cache/toolchain/kubernetes-$kv/bin/"{kube-apiserver,kube-controller-manager,kube-scheduler,kubeadm} "$cache/toolchain/etcd-$ev/bin/"{etcd,etcdctl} "$kubelet"; do
    [ -n "$f" ] && [ -x "$f" ] || { echo "error: $name needs $f; run tools/lab/build-kube.sh" >&2; exit 1; }
  done
  tmp=$(mktemp -d "$images/.$name.XXXXXX")
  mkdir -p "$tmp/bin" "$tmp/etc"
  cp "$cache/toolchain/kubernetes-$kv/bin/"{kube-apiserver,kube-controller-manager,kube-scheduler,kubeadm} "$tmp/bin/"
  cp "$cache/toolchain/etcd-$ev/bin/"{etcd,etcdctl} "$kubelet" "$tmp/bin/"
  # kubeadm restarts the kubelet through systemctl when it finds one; lab machines have no
  # systemd, and lab-kubelet picks up kubeadm's files by itself.
  cat > "$tmp/bin/systemctl" <<'SH'
#!/bin/sh
case "$*" in
  *kubelet*|daemon-reload) exit 0 ;;
  *) echo "systemctl: lab machines have no systemd ($*)" >&2; exit 1 ;;
esac
SH
  chmod 755 "$tmp/bin/systemctl"
  os_release "$tmp" "$os" " (Kubernetes $kv)"
  cat > "$tmp/image.json" <<JSON
{"name": "$name", "os": "molt lab OS $os", "kubernetesVersion": "$kv", "etcdVersion": "${ev#v}", "labKubelet": "$kubelet_version", "broken": false}
JSON
  chmod -R a-w "$tmp"
  if [ -d "$dir" ]; then mv "$dir" "$images/.$name.replaced.$(date +%s)"; fi
  mv "$tmp" "$dir"
  rm -rf "$images/.$name.replaced."*
  echo "$name: built (Kubernetes $kv, etcd ${ev#v})"
}

# build_etcd_only VERSION: etcd and etcdctl of that version, "molt lab OS 1".
build_etcd_only() {
  local v=$1 name="etcd-$1" dir tmp bin="$cache/toolchain/etcd-$1/bin"
  dir="$images/$name"
  if [ -f "$dir/image.json" ]; then
    echo "$name: present"
    return
  fi
  for f in "$bin/etcd" "$bin/etcdctl"; do
    [ -x "$f" ] || { echo "error: $name needs $f; run tools/lab/build-etcd.sh" >&2; exit 1; }
  done
  tmp=$(mktemp -d "$images/.$name.XXXXXX")
  mkdir -p "$tmp/bin" "$tmp/etc"
  cp "$bin/etcd" "$bin/etcdctl" "$tmp/bin/"
  os_release "$tmp" 1 " (etcd ${v#v})"
  cat > "$tmp/image.json" <<JSON
{"name": "$name", "os": "molt lab OS 1", "etcdVersion": "${v#v}", "broken": false}
JSON
  chmod -R a-w "$tmp"
  mv "$tmp" "$dir"
  echo "$name: built (etcd ${v#v})"
}

build lab-v1 1 ok
build lab-v2 2 ok
build lab-broken 2 broken
build lab-nossh 2 nossh
if [ "${MOLT_LAB_KUBE:-1}" = 1 ]; then
  "$here/lab/build-kube.sh"
  for minor in $LAB_KUBE_MINORS; do build_kube "$minor"; done
  build_kube "${LAB_KUBE_MINORS##* }" 2
fi
if [ "${1:-}" = --chain ]; then
  "$here/lab/build-kube.sh" $LAB_KUBE_CHAIN_MINORS
  for minor in $LAB_KUBE_CHAIN_MINORS; do build_kube "$minor"; done
fi
if [ "${MOLT_LAB_ETCD_ONLY:-1}" = 1 ]; then
  "$here/lab/build-etcd.sh"
  for v in $LAB_ETCD_ONLY; do build_etcd_only "$v"; done
fi
