#!/usr/bin/env bash
# Runs the Pulumi engine molt uses (see tools/setup-engine.sh) with molt's settings:
# e.g. `npm run pulumi -- stack ls`, `npm run pulumi -- stack export --stack lab`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$("$here/setup-engine.sh" | tail -n1)
export PATH="$bin:$PATH" PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_BACKEND_URL=${PULUMI_BACKEND_URL:-file://${MOLT_HOME:-$HOME/.molt}/state}
# A file backend without the engine's metadata sidecars, as molt runs it (docs/pulumi-engine.md).
case "$PULUMI_BACKEND_URL" in
  file://*metadata=*) ;;
  file://*\?*) PULUMI_BACKEND_URL="$PULUMI_BACKEND_URL&metadata=skip" ;;
  file://*) PULUMI_BACKEND_URL="$PULUMI_BACKEND_URL?metadata=skip" ;;
esac
export MOLT_DIST="$here/../dist"
# The project: molt's repository, or the one MOLT_PROJECT_DIR names (its stacks/ and Pulumi.yaml).
export MOLT_PROJECT_DIR="${MOLT_PROJECT_DIR:-$(cd "$here/.." && pwd)}"
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ] && [ -f "${MOLT_HOME:-$HOME/.molt}/passphrase" ]; then
  export PULUMI_CONFIG_PASSPHRASE_FILE="${MOLT_HOME:-$HOME/.molt}/passphrase"
fi
cd "$MOLT_PROJECT_DIR"
exec pulumi "$@"
