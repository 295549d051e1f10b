#!/usr/bin/env bash
# Builds molt-s3, the lab's S3-compatible server (tools/toolchain/s3: gofakes3 with SigV4
# checking and conditional deletes), from Go modules into
# $MOLT_CACHE/toolchain/molt-s3/bin/molt-s3. Tests of shared (s3://) backends run it on
# loopback. Rebuilt only when its sources change (a stamp holds their hash).
# Prints the binary's path on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}
src="$here/toolchain/s3"
bin="$cache/toolchain/molt-s3/bin"
hash=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
if [ -x "$bin/molt-s3" ] && [ "$(cat "$bin/.source" 2>/dev/null)" = "$hash" ]; then
  echo "cached: $bin/molt-s3"
  echo "$bin/molt-s3"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is needed to build the lab's S3 server (tools/toolchain/s3); install Go >= 1.26" >&2
  exit 1
fi
mkdir -p "$bin"
start=$(date +%s)
(cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/molt-s3.tmp" .)
mv "$bin/molt-s3.tmp" "$bin/molt-s3"
echo "$hash" > "$bin/.source"
echo "built molt-s3 in $(( $(date +%s) - start ))s"
echo "$bin/molt-s3"
