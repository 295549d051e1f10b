// Secrets out of everything molt reports (events, webhooks, errors, the CLI's lines). One
// pass replaces well-known secret shapes and the secrets molt itself holds with
// "[redacted]"; it is idempotent, so layers that each redact (the loop's events, the
// webhook, the CLI's errors) never disagree. Over-redacting a harmless word is the price
// of never printing a token.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const REDACTED = "[redacted]";

/** A private key's armour label: "RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK". */
const PEM_LABEL = "([A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*)";

/** A value already redacted: taken as it is (not with what follows it, such as a closing bracket). */
const DONE = "\\[redacted\\]";

/** Keys whose value is a secret in `key=value`, `key: value` and JSON. */
const SECRET_KEY =
  "[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|" +
  "client[_-]?key|account[_-]?key|credentials?)[A-Za-z0-9_.-]*|pwd|sig";

const RULES: [RegExp, string][] = [
  // PEM private key blocks, and one cut off before its end.
  [
    new RegExp(`-----BEGIN ${PEM_LABEL}-----[\\s\\S]*?-----END \\1-----`, "g"),
    `-----BEGIN $1-----${REDACTED}-----END $1-----`,
  ],
  [
    new RegExp(`-----BEGIN ${PEM_LABEL}-----(?![\\s\\S]*-----END \\1-----)[\\s\\S]*`, "g"),
    `-----BEGIN $1-----${REDACTED}`,
  ],
  // GitHub tokens (classic, OAuth, app, refresh; fine-grained).
  [/(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g, REDACTED],
  // AWS access key ids.
  [/(?:AKIA|ASIA)[A-Z0-9]{16}/g, REDACTED],
  // Slack tokens.
  [/xox[abeoprs]-[A-Za-z0-9-]{8,}/g, REDACTED],
  // JWTs (Kubernetes service account tokens among them).
  [/eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, REDACTED],
  // kubeadm bootstrap tokens ("abcdef.0123456789abcdef").
  [/(?<![A-Za-z0-9])[a-z0-9]{6}\.[a-z0-9]{16}(?![A-Za-z0-9])/g, REDACTED],
  // URL user info: scheme://user:password@
  [/([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s/?#@:]*:[^\s/?#@]*@/g, `$1${REDACTED}@`],
  // HTTP authorization: "Authorization: Basic xyz", "Bearer xyz".
  [
    new RegExp(`(authorization["']?[ \\t]*[:=][ \\t]*["']?)([A-Za-z]+[ \\t]+)?(?:${DONE}|[^\\s"',;]+)`, "gi"),
    `$1$2${REDACTED}`,
  ],
  [/(\bbearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*/gi, `$1${REDACTED}`],
  // JSON: "password": "...".
  [new RegExp(`("(?:${SECRET_KEY})"[ \\t]*:[ \\t]*)"(?:[^"\\\\]|\\\\.)*"`, "gi"), `$1"${REDACTED}"`],
  // key=value (a query string, an env dump, a CLI flag); quoted values whole.
  [
    new RegExp(
      `((?<![A-Za-z0-9_.-])(?:${SECRET_KEY})[ \\t]*=[ \\t]*)(${DONE}|"[^"\\n]*"|'[^'\\n]*'|[^\\s&,;"']+)`,
      "gi",
    ),
    `$1${REDACTED}`,
  ],
  // key: value (YAML, headers, logs), a value of 4 characters or more (not a word like "no").
  [
    new RegExp(
      `((?<![A-Za-z0-9_.-])(?:${SECRET_KEY})[ \\t]*:[ \\t]*)(${DONE}|"[^"\\n]*"|'[^'\\n]*'|[^\\s&,;"']{4,})`,
      "gi",
    ),
    `$1${REDACTED}`,
  ],
];

/** Known secrets shorter than this are not looked for: they would match ordinary words. */
export const MIN_KNOWN_SECRET = 8;

const known = new Set<string>();
let knownRegex: RegExp | undefined;

/** A secret molt holds (a passphrase, join material, a key): from now on never reported. */
export function rememberSecret(value: unknown): void {
  if (typeof value !== "string") return;
  const v = value.trim();
  if (v.length < MIN_KNOWN_SECRET || v.includes(REDACTED) || known.has(v)) return;
  known.add(v);
  knownRegex = undefined;
}

/** The environment variables molt reads that hold secrets. */
export const SECRET_ENV = [
  "PULUMI_CONFIG_PASSPHRASE",
  "PULUMI_ACCESS_TOKEN",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AZURE_STORAGE_KEY",
  "AZURE_STORAGE_SAS_TOKEN",
  "AZURE_STORAGE_CONNECTION_STRING",
  "AZURE_CLIENT_SECRET",
  "MOLT_SIGNING_KEY",
];

/**
 * The secrets of an environment: the variables above, and the passphrase in
 * PULUMI_CONFIG_PASSPHRASE_FILE or the one molt made in `moltHome`.
 */
export function rememberEnvSecrets(env: Record<string, string | undefined>, moltHome?: string): void {
  for (const k of SECRET_ENV) rememberSecret(env[k]);
  const files = [env.PULUMI_CONFIG_PASSPHRASE_FILE, moltHome && join(moltHome, "passphrase")];
  for (const f of files) {
    if (!f || !existsSync(f)) continue;
    try {
      rememberSecret(readFileSync(f, "utf8"));
    } catch {
      // Unreadable here: the engine will say so; nothing of it can be printed either.
    }
  }
}

function knownSecrets(): RegExp | undefined {
  if (known.size === 0) return undefined;
  // Longest first: a secret containing another is replaced whole.
  knownRegex ??= new RegExp(
    [...known]
      .sort((a, b) => b.length - a.length)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("|"),
    "g",
  );
  return knownRegex;
}

function once(s: string): string {
  const k = knownSecrets();
  let out = k ? s.replace(k, REDACTED) : s;
  for (const [re, to] of RULES) out = out.replace(re, to);
  return out;
}

/** `s` with every secret shape and every secret molt holds replaced by "[redacted]". */
export function redactText(s: string): string {
  // To a fixed point: a replacement can expose a match a rule's scan had stepped over.
  let out = s;
  for (let i = 0; i < 5; i++) {
    const next = once(out);
    if (next === out) return out;
    out = next;
  }
  return out;
}

/** Every string inside `v` redacted (a new value; numbers, booleans and bigints as they were). */
export function redactDeep<T>(v: T): T {
  if (typeof v === "string") return redactText(v) as T;
  if (Array.isArray(v)) return v.map((x: unknown) => redactDeep(x)) as T;
  if (v && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype)
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactDeep(x)])) as T;
  return v;
}

/** A URL to show: scheme, host and path; never its user info, query or fragment. */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "(invalid URL)";
  }
}

/**
 * A process's output as reported line by line: each line redacted, and a private key printed
 * over several lines kept out whole (its BEGIN line is shown as redacted, its body not at all).
 */
export class LineRedactor {
  private inKey?: string;

  /** The line to report, or undefined for a line inside a private key. */
  line(l: string): string | undefined {
    if (this.inKey !== undefined) {
      const end = `-----END ${this.inKey}-----`;
      const i = l.indexOf(end);
      if (i < 0) return undefined;
      this.inKey = undefined;
      return end + redactText(l.slice(i + end.length));
    }
    const begin = new RegExp(`-----BEGIN ${PEM_LABEL}-----`, "g");
    for (let m = begin.exec(l); m; m = begin.exec(l)) {
      const end = `-----END ${m[1]}-----`;
      const e = l.indexOf(end, m.index);
      if (e < 0) {
        this.inKey = m[1];
        break;
      }
      begin.lastIndex = e + end.length;
    }
    return redactText(l);
  }
}
