// Host keys of the hosts to adopt are never trusted on first use silently: the user names
// the expected ones (fingerprints, a known_hosts file, or the installer's recorded keys),
// or confirms the fingerprints molt saw. Pure: parsing and comparing.
import { createHmac } from "node:crypto";
import { fingerprintOf } from "../../infra/remote/ssh";

export type KeyVerdict =
  { kind: "match"; source: string } | { kind: "mismatch"; source: string; expected: string[] } | { kind: "unknown" };

interface KnownHostsEntry {
  patterns: string[];
  fingerprint: string;
}

export class InvalidHostKeyInputError extends Error {
  constructor(readonly problems: string[]) {
    super(`expected host keys are not usable; nothing was recorded:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "InvalidHostKeyInputError";
  }
}

/** The expectations of one adoption: from --host-key flags, a known_hosts file, the installer. */
export class ExpectedHostKeys {
  private readonly flags = new Map<string, string[]>();
  private readonly known: KnownHostsEntry[] = [];
  private readonly installer = new Map<string, string>();

  /** `--host-key HOST[:PORT]=SHA256:...` (or a public key line instead of the fingerprint). */
  addFlags(flags: string[]): this {
    const problems: string[] = [];
    for (const f of flags) {
      const i = f.indexOf("=");
      const host = i > 0 ? f.slice(0, i).trim() : "";
      const value = i > 0 ? f.slice(i + 1).trim() : "";
      let fp: string | undefined;
      if (/^SHA256:[A-Za-z0-9+/]{43}$/.test(value)) fp = value;
      else
        try {
          fp = fingerprintOf(value);
        } catch {
          fp = undefined;
        }
      if (!host || !fp) {
        problems.push(
          `--host-key ${JSON.stringify(f)}: HOST=SHA256:<43 characters> (ssh-keygen -lf prints it) or ` +
            `HOST="ssh-ed25519 AAAA..."`,
        );
        continue;
      }
      this.flags.set(host, [...(this.flags.get(host) ?? []), fp]);
    }
    if (problems.length) throw new InvalidHostKeyInputError(problems);
    return this;
  }

  /** An OpenSSH known_hosts file (plain or hashed host names; markers are not trusted). */
  addKnownHosts(text: string, file: string): this {
    const problems: string[] = [];
    text.split("\n").forEach((raw, n) => {
      const line = raw.trim();
      if (!line || line.startsWith("#")) return;
      if (line.startsWith("@")) return; // @cert-authority / @revoked: not a key to pin
      const [hosts, type, blob] = line.split(/\s+/);
      try {
        if (!hosts || !type || !blob) throw new Error("short line");
        this.known.push({ patterns: hosts.split(","), fingerprint: fingerprintOf(`${type} ${blob}`) });
      } catch {
        problems.push(`${file}:${n + 1}: not a known_hosts line ("HOST[,HOST] TYPE KEY")`);
      }
    });
    if (problems.length) throw new InvalidHostKeyInputError(problems);
    return this;
  }

  /** A key the installer recorded for this host (KubeOne's ssh_hosts_keys / bastion_host_key). */
  addInstallerKey(host: string, port: number, keyLine: string): this {
    this.installer.set(hostPort(host, port), fingerprintOf(keyLine));
    return this;
  }

  /** What the user expects for host:port, and from where. */
  expected(host: string, port: number): { source: string; fingerprints: string[] } | undefined {
    const flagged = this.flags.get(hostPort(host, port)) ?? this.flags.get(host) ?? [];
    if (flagged.length) return { source: "--host-key", fingerprints: flagged };
    const name = port === 22 ? host : `[${host}]:${port}`;
    const known = this.known.filter((k) => k.patterns.some((p) => matches(p, name))).map((k) => k.fingerprint);
    if (known.length) return { source: "known_hosts", fingerprints: known };
    const inst = this.installer.get(hostPort(host, port));
    if (inst) return { source: "the installer's recorded host keys", fingerprints: [inst] };
    return undefined;
  }

  verdict(host: string, port: number, seenKeyLine: string): KeyVerdict {
    const e = this.expected(host, port);
    if (!e) return { kind: "unknown" };
    const seen = fingerprintOf(seenKeyLine);
    return e.fingerprints.includes(seen)
      ? { kind: "match", source: e.source }
      : { kind: "mismatch", source: e.source, expected: e.fingerprints };
  }
}

function hostPort(host: string, port: number): string {
  return port === 22 ? host : `${host}:${port}`;
}

/** One known_hosts host pattern against a name ("host" or "[host]:port"): plain, or |1|salt|hash. */
function matches(pattern: string, name: string): boolean {
  if (pattern.startsWith("|1|")) {
    const [, , salt, hash] = pattern.split("|");
    if (!salt || !hash) return false;
    return createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64") === hash;
  }
  if (pattern.startsWith("!")) return false;
  if (pattern.includes("*") || pattern.includes("?")) return false; // wildcards never pin one host
  return pattern === name;
}
