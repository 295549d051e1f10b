#!/usr/bin/env bash
# Provides the Pulumi engine for molt.
#  - A `pulumi` on PATH (or $MOLT_PULUMI) of at least PULUMI_MIN_VERSION is reused as it is:
#    machines with a normal Pulumi installation never go through the Go build.
#  - Otherwise the pinned CLI is built from Go modules (tools/toolchain/pulumi) into
#    $MOLT_CACHE/toolchain/pulumi-<version>/bin, stamped with its version so the
#    Automation API accepts it, next to the launcher the engine uses for dynamic providers.
# Prints the path of the engine's bin directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/versions.env
. "$here/versions.env"
cache=${MOLT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/molt}
export PULUMI_SKIP_UPDATE_CHECK=true

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

candidate=${MOLT_PULUMI:-$(command -v pulumi 2>/dev/null || true)}
if [ -n "$candidate" ]; then
  have=$("$candidate" version 2>/dev/null | tr -d 'v' || true)
  if [ -n "$have" ] && version_ge "$have" "$PULUMI_MIN_VERSION"; then
    echo "reusing $candidate (v$have >= v$PULUMI_MIN_VERSION); no build needed"
    dirname "$candidate"
    exit 0
  fi
  echo "ignoring $candidate: version '${have:-unknown}' is older than v$PULUMI_MIN_VERSION or did not answer"
fi

bin="$cache/toolchain/pulumi-$PULUMI_VERSION/bin"
mkdir -p "$bin"

# The launcher the engine starts for pulumi.dynamic.Resource providers. It runs the
# dynamic provider host of the @pulumi/pulumi that the program itself uses.
launcher="$bin/pulumi-resource-pulumi-nodejs"
cat > "$launcher.tmp" <<'SH'
#!/bin/sh
# Started by the Pulumi engine in the program's directory; molt's stack driver also
# names its own dist/ in MOLT_DIST, whose node_modules are used when the program
# directory has none.
host=./node_modules/@pulumi/pulumi/cmd/dynamic-provider
if [ ! -d "$host" ] && [ -n "${MOLT_DIST:-}" ]; then
  host="$MOLT_DIST/../node_modules/@pulumi/pulumi/cmd/dynamic-provider"
fi
if [ ! -d "$host" ]; then
  echo "pulumi-resource-pulumi-nodejs: no node_modules/@pulumi/pulumi in $PWD; run npm ci" >&2
  exit 1
fi
# The provider goes when its engine goes: a killed engine would otherwise leave it running
# (parent pid 1), possibly in the middle of a remote step on a node. The kernel sends it
# SIGKILL when its parent, the engine, dies (prctl PR_SET_PDEATHSIG through setpriv).
if command -v setpriv >/dev/null 2>&1; then
  exec setpriv --pdeathsig KILL -- node "$host" "$@"
fi
exec node "$host" "$@"
SH
chmod +x "$launcher.tmp" && mv "$launcher.tmp" "$launcher"

# The language host the engine starts when molt's project is run by hand (`npm run pulumi --
# preview`): molt's own (orchestrator/stack/language-host.ts), since Pulumi's Go language
# host cannot be built from the module proxy. molt's own runs need none (inline program).
langhost="$bin/pulumi-language-nodejs"
cat > "$langhost.tmp" <<'SH'
#!/bin/sh
host="${MOLT_DIST:-}/orchestrator/stack/language-host.js"
if [ -z "${MOLT_DIST:-}" ] || [ ! -f "$host" ]; then
  echo "pulumi-language-nodejs: molt's language host runs through \`npm run pulumi -- ...\` (which sets MOLT_DIST to a built dist/); run npm run build first" >&2
  exit 1
fi
if command -v setpriv >/dev/null 2>&1; then
  exec setpriv --pdeathsig KILL -- node "$host" "$@"
fi
exec node "$host" "$@"
SH
chmod +x "$langhost.tmp" && mv "$langhost.tmp" "$langhost"

if [ -x "$bin/pulumi" ] && [ "$("$bin/pulumi" version 2>/dev/null)" = "$PULUMI_VERSION" ]; then
  echo "cached: $bin/pulumi ($PULUMI_VERSION)"
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<MSG
error: no Pulumi CLI >= v$PULUMI_MIN_VERSION on PATH, and Go is not installed to build one.
  Either install Pulumi (https://www.pulumi.com/docs/install/) and put it on PATH,
  or install Go >= 1.26 and run this script again to build $PULUMI_VERSION from Go modules.
MSG
  exit 1
fi

echo "building pulumi $PULUMI_VERSION from Go modules (cold: several minutes on 2 cores)"
start=$(date +%s)
(
  cd "$here/toolchain/pulumi"
  export GOFLAGS=-mod=mod
  go build -v -trimpath \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    -o "$bin/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi 2>&1 |
    awk '{ n++ } n % 50 == 0 { printf "  ... %d packages compiled (latest: %s)\n", n, $0; fflush() }'
)
mv "$bin/pulumi.tmp" "$bin/pulumi"
echo "built $("$bin/pulumi" version) in $(( $(date +%s) - start ))s"
echo "$bin"
