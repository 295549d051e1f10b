#!/usr/bin/env sh
# An example pipeline for staging across environments (docs/staging.md):
# a plain shell sequence any CI system can run, as one job or one step per stage. It rolls
# staging to the release in stacks/Pulumi.staging.yaml, soaks it, promotes exactly that release
# into stacks/Pulumi.prod.yaml, commits the change for review, and rolls prod, which refuses
# (exit 2) any release staging has not verified.
#
#   STAGE=staging|promote|prod|all (default all)    MOLT="npm run -s molt --"    GIT_PUSH=1 to push
#
# The runner needs what any molt run needs: the repository, the stacks' backend(s)
# (PULUMI_BACKEND_URL, or per stack in CI variables) and PULUMI_CONFIG_PASSPHRASE (or a KMS
# secrets provider). Secrets come from the CI system's secret store, never the command line.
# The staging job also holds staging's signing key (MOLT_SIGNING_KEY_FILE, a file the CI
# system writes from its secret store, or the key itself in MOLT_SIGNING_KEY; `molt keygen`
# makes one); the promote and prod jobs need only the public key, in stacks/Pulumi.$TO.yaml.
set -eu

MOLT=${MOLT:-"npm run -s molt --"}
FROM=${FROM:-staging}
TO=${TO:-prod}
STAGE=${STAGE:-all}

release_of() {
  node -e 'const y=require("yaml");const c=y.parse(require("fs").readFileSync(process.argv[1],"utf8")).config;
           process.stdout.write(String((c["molt:release"]||{}).name||""))' "stacks/Pulumi.$1.yaml"
}

roll_staging() {
  # Rolls, then soaks inline (molt:promotion.soakMinutes) and records the verification in
  # staging's backend, signed with MOLT_SIGNING_KEY_FILE. Exit 7: the cluster did not stay
  # healthy; there is no record.
  if [ -z "${MOLT_SIGNING_KEY_FILE:-}${MOLT_SIGNING_KEY:-}" ]; then
    echo "note: no MOLT_SIGNING_KEY_FILE: the record is unsigned, and a stack that names a publicKey refuses it" >&2
  fi
  $MOLT rollout --stack "$FROM" --yes --verify
}

promote() {
  # Refused (exit 2) unless staging's record is intact, soaked, signed with the key prod's
  # requireVerifiedOn names (if it names one), and staging still runs the release healthy.
  $MOLT promote --from "$FROM" --to "$TO" --yes
  if ! git diff --quiet -- "stacks/Pulumi.$TO.yaml"; then
    git add "stacks/Pulumi.$TO.yaml"
    git commit -m "promote release $(release_of "$TO") from $FROM to $TO"
    if [ "${GIT_PUSH:-0}" = 1 ]; then git push; fi
  fi
}

roll_prod() {
  # Refused (exit 2, naming what is missing) unless every stack in molt:promotion.requireVerifiedOn
  # holds a valid record of this release.
  $MOLT rollout --stack "$TO" --yes
  $MOLT status --stack "$TO"
}

case "$STAGE" in
  staging) roll_staging ;;
  promote) promote ;;
  prod) roll_prod ;;
  all) roll_staging && promote && roll_prod ;;
  *) echo "STAGE must be staging, promote, prod or all (got $STAGE)" >&2; exit 2 ;;
esac
