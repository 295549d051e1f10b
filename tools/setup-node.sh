#!/usr/bin/env bash
# Provides Node.js >= NODE_MIN_VERSION (tools/versions.env) for molt.
#  - The `node` on PATH is used when it is new enough.
#  - Otherwise the pinned NODE_VERSION is installed from the npm registry (the official
#    binary as the node-linux-<arch> package) into $MOLT_CACHE/toolchain/node-<version>;
#    cached: a second run takes no time.
# Prints the directory holding the `node` to use on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

have=$(node --version 2>/dev/null | tr -d 'v' || true)
if [ -n "$have" ] && version_ge "$have" "$NODE_MIN_VERSION"; then
  echo "node $have on PATH (>= $NODE_MIN_VERSION)"
  dirname "$(command -v node)"
  exit 0
fi

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "error: no Node.js >= $NODE_MIN_VERSION and no npm package of node for $(uname -m); install Node.js $NODE_MIN_VERSION or newer" >&2; exit 1 ;;
esac
dir="$cache/toolchain/node-$NODE_VERSION"
bin="$dir/node_modules/node-linux-$arch/bin"
if [ -x "$bin/node" ] && [ "$("$bin/node" --version)" = "v$NODE_VERSION" ]; then
  echo "cached: node $NODE_VERSION (node on PATH: ${have:-none})"
  echo "$bin"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "error: node ${have:-(none)} is older than $NODE_MIN_VERSION and npm is missing to install $NODE_VERSION; install Node.js >= $NODE_MIN_VERSION" >&2
  exit 1
fi
echo "node ${have:-(none)} is older than $NODE_MIN_VERSION: installing node $NODE_VERSION from the npm registry into $dir"
mkdir -p "$dir"
npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$dir" "node-linux-$arch@$NODE_VERSION" >/dev/null
"$bin/node" --version >/dev/null
echo "$bin"
