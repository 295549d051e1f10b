#!/usr/bin/env bash
# Provisions everything molt needs on this machine, idempotently:
#   1. Debian packages the lab and the tests use (only when missing; needs root),
#   2. npm dependencies from the lockfile,
#   3. the Pulumi engine: reused from PATH when suitable, else built from Go modules
#      into a cache outside the work tree (~/.cache/molt by default),
#   4. the lab images (versioned, read-only directories of binaries),
#   5. the lab's S3-compatible server (for shared-backend tests), built from Go modules.
# Re-running it is cheap: every step checks before it works.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}
skip_apt=${MOLT_SKIP_APT:-}
skip_npm=${MOLT_SKIP_NPM:-}

step() { printf '\n==> %s\n' "$*"; }
now() { date +%s.%N; }
t0=$(now)

step "Debian packages"
need_pkgs=()
for pair in etcd:etcd-server etcdctl:etcd-client haproxy:haproxy sshd:openssh-server ssh:openssh-client \
            ip:iproute2 unshare:util-linux nsenter:util-linux openssl:openssl shellcheck:shellcheck \
            setsid:util-linux setpriv:util-linux pkill:procps curl:curl ss:iproute2 base64:coreutils keepalived:keepalived; do
  bin=${pair%%:*} pkg=${pair#*:}
  if ! command -v "$bin" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$bin" ] && ! [ -x "/usr/bin/$bin" ]; then
    need_pkgs+=("$pkg")
  fi
done
if [ ${#need_pkgs[@]} -eq 0 ]; then
  echo "all present"
elif [ -n "$skip_apt" ]; then
  echo "missing Debian packages: ${need_pkgs[*]} (MOLT_SKIP_APT is set, not installing)" >&2
else
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing Debian packages ${need_pkgs[*]} and not root; run: sudo apt-get install ${need_pkgs[*]}" >&2
    exit 1
  fi
  echo "installing: ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  # The Debian etcd, haproxy and keepalived packages start system services; the lab runs its own.
  for svc in etcd haproxy keepalived; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then systemctl stop "$svc" || true; fi
  done
fi

step "Node.js (>= $NODE_MIN_VERSION)"
nodebin=$("$here/setup-node.sh" | tee /dev/stderr | tail -n1)
if [ "$(command -v node 2>/dev/null || true)" != "$nodebin/node" ]; then
  export PATH="$nodebin:$PATH"
  if [ "$(id -u)" -eq 0 ] && [ -z "${MOLT_NO_NODE_LINK:-}" ]; then
    # As a Debian package would: ahead of the distribution's /usr/bin/node on PATH, so
    # `npm run ...` after this script uses it too.
    ln -sfn "$nodebin/node" /usr/local/bin/node
    echo "linked /usr/local/bin/node -> $nodebin/node"
  else
    echo "note: put $nodebin first on PATH (export PATH=\"$nodebin:\$PATH\") before running molt" >&2
  fi
fi

step "npm dependencies"
# Native add-ons (ssh2's) are built for one Node.js ABI: a new node needs a fresh install.
abi=$(node -p process.versions.modules)
if [ -n "$skip_npm" ]; then
  echo "skipped (MOLT_SKIP_NPM)"
elif [ -d "$repo/node_modules/@pulumi/pulumi" ] && [ "$repo/node_modules/.package-lock.json" -nt "$repo/package-lock.json" ] &&
  [ "$(cat "$repo/node_modules/.molt-node-abi" 2>/dev/null || true)" = "$abi" ]; then
  echo "up to date"
else
  (cd "$repo" && npm ci --no-audit --no-fund && echo "$abi" > node_modules/.molt-node-abi)
fi

step "Pulumi engine"
"$here/setup-engine.sh"

step "lab images"
"$here/lab/build-images.sh"

step "lab S3 server"
"$here/setup-s3.sh"

awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "\nsetup done in %.1fs\n", b - a }'
