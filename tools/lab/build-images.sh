#!/usr/bin/env bash
# Builds the lab's machine images: versioned, read-only directories a lab machine boots
# from (its /usr/local/bin and /etc/os-release). An image, once built, is never changed;
# a different content means a different image name.
#   lab-v1      Debian etcd 3.4.23, "molt lab OS 1"
#   lab-v2      same etcd, "molt lab OS 2"  (a base-image rollout: v1 -> v2)
#   lab-broken  an etcd that never starts     (rollback tests)
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
  cp "$etcdctl_bin" "$tmp/bin/etcdctl"
  cat > "$tmp/etc/os-release" <<OS
PRETTY_NAME="molt lab OS $os"
NAME="molt lab OS"
VERSION_ID="$os"
ID=molt-lab
OS
  cat > "$tmp/image.json" <<JSON
{"name": "$name", "os": "molt lab OS $os", "etcdVersion": "$etcd_version", "broken": $([ "$mode" = broken ] && echo true || echo false)}
JSON
  chmod -R a-w "$tmp"
  mv "$tmp" "$dir"
  echo "$name: built (etcd $etcd_version)"
}

build lab-v1 1 ok
build lab-v2 2 ok
build lab-broken 2 broken
