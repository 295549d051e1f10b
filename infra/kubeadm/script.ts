// How every rendered node script is put together. The one rule that keeps them safe:
// values from typed inputs enter a script only as single-quoted, read-only constants at
// its top; the script text below them is static bash that refers to those constants
// (always double-quoted). So no input can become code, and shellcheck sees the real text.
//
// Scripts run as the SSH user through RemoteCommand (`bash -euo pipefail -c SCRIPT`).
// Cloud images log in as an unprivileged user with password-less sudo, so `main` is
// re-entered as root with `sudo -n` when needed; stdin (join secrets) passes through.
import { shellQuote } from "../remote/ssh";

export interface ScriptParts {
  /** One line saying what the script does, shown at its top. */
  title: string;
  /** Values from typed inputs; names are UPPER_SNAKE. */
  constants: Record<string, string>;
  /** Static bash function definitions (no interpolated values). */
  functions: readonly string[];
  /** Static body of `main`. */
  main: string;
}

const CONSTANT_NAME = /^[A-Z][A-Z0-9_]*$/;

export function renderScript(parts: ScriptParts): string {
  const names = Object.keys(parts.constants);
  for (const n of names) {
    if (!CONSTANT_NAME.test(n)) throw new Error(`invalid script constant name ${JSON.stringify(n)}`);
  }
  const constants = names.map((n) => {
    const v = parts.constants[n];
    // A literal "$" or "`" in a value is meant literally: single quotes are the point.
    const literal = /[$`]/.test(v) ? "# shellcheck disable=SC2016 # literal value, never expanded\n" : "";
    return `${literal}readonly ${n}=${shellQuote(v)}`;
  });
  // `declare -p` re-creates the constants in the root shell; `declare -f` the functions.
  const carry = names.length
    ? [
        `  constants=(${names.join(" ")})`,
        `  sudo -n -- bash -euo pipefail -c "$(declare -p "\${constants[@]}"); $(declare -f); main"`,
      ]
    : [`  sudo -n -- bash -euo pipefail -c "$(declare -f); main"`];
  return [
    "#!/usr/bin/env bash",
    `# molt: ${parts.title.replace(/\n/g, " ")}`,
    "# Rendered from typed inputs by molt; do not edit. Idempotent: safe to run again.",
    "set -euo pipefail",
    ...constants,
    "",
    LOG_FUNCTION,
    ...parts.functions,
    "main() {",
    indent(parts.main.trim()),
    "}",
    "",
    'if [ "$(id -u)" -eq 0 ]; then',
    "  main",
    "else",
    ...carry,
    "fi",
    "",
  ].join("\n");
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((l) => (l.length ? `  ${l}` : l))
    .join("\n");
}

/** Progress goes to stderr: RemoteCommand keeps stdout in the state, errors show stderr. */
const LOG_FUNCTION = `log() {
  printf '[molt %s] %s\\n' "$(date -u +%H:%M:%S)" "$*" >&2
}
`;
