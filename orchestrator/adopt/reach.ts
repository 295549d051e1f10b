// Reaching the hosts of a cluster molt did not create: the bastion, host keys scanned
// without trust and compared with what the user named, and a login to each host.
import type { StackConfig } from "../config";
import {
  fingerprintOf,
  scanHostKey,
  SshSession,
  type BastionTarget,
  type SshCredentials,
  type SshTarget,
} from "../../infra/remote/ssh";
import { HostKeysNotConfirmedError, refuseUnless, type AdoptEvent, type Refuse, type SeenHostKey } from "./errors";
import type { ExpectedHostKeys } from "./host-keys";
import type { AdoptionHost, AdoptionInput } from "./input";
import { probeScript, parseProbe, type HostFacts } from "./probe";

/**
 * Each host's key, checked against what the user named: a mismatch refuses, keys nobody
 * named are confirmed by `confirm` or refused (exit 6).
 */
export async function pinnedHostKeys(
  hosts: AdoptionHost[],
  bastion: BastionTarget | undefined,
  expected: ExpectedHostKeys,
  confirm: ((seen: SeenHostKey[]) => Promise<boolean>) | undefined,
  emit: (e: AdoptEvent) => void,
  refuse: Refuse,
): Promise<Map<AdoptionHost, string>> {
  const seen = await scanAll(hosts, bastion, refuse);
  const unknown: SeenHostKey[] = [];
  const wrong: string[] = [];
  for (const [h, keyLine] of seen) {
    const v = expected.verdict(h.sshHost, h.sshPort, keyLine);
    const fp = fingerprintOf(keyLine);
    if (v.kind === "mismatch")
      wrong.push(
        `host ${h.sshHost}:${h.sshPort} presents ${fp}, but ${v.source} expects ${v.expected.join(" or ")}: ` +
          "a replaced machine, a wrong address, or someone in the middle",
      );
    else if (v.kind === "unknown")
      unknown.push({ host: h.sshHost, port: h.sshPort, role: "host", keyLine, fingerprint: fp });
    else emit({ type: "host-key", host: h.sshHost, port: h.sshPort, fingerprint: fp, trust: v.source });
  }
  if (wrong.length) refuse(...wrong);
  if (unknown.length) {
    if (!confirm || !(await confirm(unknown))) throw new HostKeysNotConfirmedError(unknown);
    for (const k of unknown)
      emit({ type: "host-key", host: k.host, port: k.port, fingerprint: k.fingerprint, trust: "confirmed" });
  }
  return seen;
}

/**
 * What molt logs in to hosts it did not create with: the ssh-agent (molt:ssh.agent) and, on a
 * cloud stack, the stack's own key (molt:ssh.privateKey) when it is set - the one the rollout
 * uses later too. Neither: refused, saying how to give one.
 */
export function adoptCredentials(
  cfg: Pick<StackConfig, "file" | "sshAccess" | "cloud">,
  privateKey: string | undefined,
  input: Pick<AdoptionInput, "sshKeySource">,
  refuse: Refuse,
): SshCredentials {
  const agent = cfg.sshAccess.agent === true;
  if (!agent && !privateKey) {
    const file = input.sshKeySource?.privateKeyFile ?? "KEYFILE";
    refuse(
      "molt has no SSH credential for hosts it did not create: set molt:ssh.agent: true in " +
        `${cfg.file} and load the installer's key into ssh-agent (ssh-add ${file})` +
        (cfg.cloud
          ? ", or make it the stack's own key: pulumi config set --secret --path molt:ssh.privateKey " +
            `--stack STACK < ${file}`
          : ""),
    );
  }
  return { ...(privateKey ? { privateKey } : {}), ...(agent ? { agent: true as const } : {}) };
}

/** The bastion of molt:ssh, checked against the installer's. */
export function bastionOf(
  cfg: StackConfig,
  input: AdoptionInput,
  refuse: Refuse,
  credentials: SshCredentials = { agent: true },
): BastionTarget | undefined {
  const mine = cfg.sshAccess.bastion;
  const theirs = input.bastion;
  if (theirs && !mine)
    refuse(
      `the hosts are reached through bastion ${theirs.user ? `${theirs.user}@` : ""}${theirs.host}:${theirs.port}; ` +
        `add it to ${cfg.file} as molt:ssh.bastion: { host: ${theirs.host}, port: ${theirs.port}` +
        `${theirs.user ? `, user: ${theirs.user}` : ""}, hostKey: "<its host key>" } (every connection molt makes ` +
        `goes through it)`,
    );
  if (theirs && mine && (theirs.host !== mine.host || theirs.port !== mine.port))
    refuse(
      `the installer's bastion is ${theirs.host}:${theirs.port}, but molt:ssh.bastion is ${mine.host}:${mine.port}; ` +
        `make them the same`,
    );
  if (theirs?.hostKey && mine && fingerprintOf(theirs.hostKey) !== fingerprintOf(mine.hostKey))
    refuse(
      `the installer records bastion host key ${fingerprintOf(theirs.hostKey)}, but molt:ssh.bastion.hostKey is ` +
        `${fingerprintOf(mine.hostKey)}; one of them is wrong`,
    );
  if (!mine) return undefined;
  return {
    host: mine.host,
    port: mine.port,
    user: mine.user,
    hostKey: mine.hostKey,
    ...credentials,
  };
}

async function scanAll(
  hosts: AdoptionHost[],
  bastion: BastionTarget | undefined,
  refuse: Refuse,
): Promise<Map<AdoptionHost, string>> {
  const seen = new Map<AdoptionHost, string>();
  const failures: ReachFailure[] = [];
  // One at a time through a bastion (sshd's MaxStartups), in parallel otherwise.
  const scan = async (h: AdoptionHost) => {
    try {
      seen.set(h, await scanHostKey(h.sshHost, h.sshPort, bastion ? { bastion } : {}));
    } catch (error) {
      failures.push({ host: h.sshHost, port: h.sshPort, doing: "is not reachable over SSH", error });
    }
  };
  if (bastion) for (const h of hosts) await scan(h);
  else await Promise.all(hosts.map(scan));
  refuseUnless(reachProblems(failures), refuse);
  return seen;
}

export interface ReachFailure {
  host: string;
  port: number;
  /** What failed, after the host: "is not reachable over SSH", "cannot log in as root". */
  doing: string;
  error: unknown;
}

/**
 * Every host that failed, by name. A failure of the bastion itself (it refused molt, or its
 * host key is not the pinned one) is the same for every host: said once, first. A host the
 * bastion could not connect to (its SSH port refused, no route) is that host's failure.
 */
export function reachProblems(failures: readonly ReachFailure[]): string[] {
  const bastion = failures.map((f) => bastionProblem(f.error)).filter((p): p is string => p !== undefined);
  const hosts = failures
    .filter((f) => bastionProblem(f.error) === undefined)
    .sort((a, b) => a.host.localeCompare(b.host) || a.port - b.port)
    .map((f) => `host ${f.host}:${f.port} ${f.doing}: ${(f.error as Error).message}`);
  return [...bastion.slice(0, 1), ...hosts];
}

function bastionProblem(e: unknown): string | undefined {
  const n = (e as Error).name;
  if (n === "BastionError") return `the bastion refused: ${(e as Error).message}`;
  if (n === "HostKeyMismatchError" && /bastion/.test((e as Error).message))
    return `the bastion's host key is not molt:ssh.bastion.hostKey: ${(e as Error).message}`;
  return undefined;
}

export async function probeAll(
  hosts: AdoptionHost[],
  target: (h: AdoptionHost) => SshTarget,
  refuse: Refuse,
  /** The stack's provider: a cloud's machines are asked for their identity (probe.ts). */
  provider?: string,
): Promise<Map<AdoptionHost, HostFacts>> {
  const facts = new Map<AdoptionHost, HostFacts>();
  const failures: ReachFailure[] = [];
  await Promise.all(
    hosts.map(async (h) => {
      let ssh: SshSession | undefined;
      try {
        ssh = await SshSession.connect(target(h), { readyTimeoutMs: 15_000 });
        const r = await ssh.exec(probeScript(ssh.target.user, provider));
        facts.set(h, parseProbe(r.stdout));
      } catch (error) {
        failures.push({ host: h.sshHost, port: h.sshPort, doing: `cannot log in as ${target(h).user}`, error });
      } finally {
        ssh?.close();
      }
    }),
  );
  refuseUnless(reachProblems(failures), refuse);
  return facts;
}
