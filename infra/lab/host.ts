// Host-side helpers of the lab "cloud": the only code that touches this machine's
// network and namespaces. Everything molt does *inside* a lab machine goes over SSH.
import { DeadlineError, pollUntil } from "../../lib/poll";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { connect } from "node:net";

export class LabHostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LabHostError";
  }
}

export function assertRoot(): void {
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    throw new LabHostError(
      "the lab needs root: its machines are network, mount and UTS namespaces with their own sshd. " +
        "Run molt as root (e.g. sudo -E npm run rollout -- --stack lab), or use a cloud stack.",
    );
  }
}

export function sh(cmd: string, args: string[], opts: { allowFail?: boolean; input?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err && !opts.allowFail)
        reject(new LabHostError(`${cmd} ${args.join(" ")} failed: ${(stderr + stdout).trim() || err.message}`));
      else resolve(stdout);
    });
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

export interface Subnet {
  /** e.g. "10.77.0" for a /24 */
  prefix: string;
  bits: number;
  gateway: string;
}

export function parseSubnet(cidr: string): Subnet {
  const m = /^(\d+)\.(\d+)\.(\d+)\.0\/24$/.exec(cidr);
  if (!m || [m[1], m[2], m[3]].some((o) => Number(o) > 255))
    throw new LabHostError(`lab subnet must be an IPv4 /24 like 10.77.0.0/24, got "${cidr}"`);
  const prefix = `${m[1]}.${m[2]}.${m[3]}`;
  return { prefix, bits: 24, gateway: `${prefix}.1` };
}

/** Short, stable interface names (Linux allows 15 characters). */
export function ifaceName(kind: "h" | "p", machine: string): string {
  return `mv${kind}${createHash("sha256").update(machine).digest("hex").slice(0, 10)}`;
}

export function netnsName(lab: string, machine: string): string {
  return `molt-${lab}-${machine}`;
}

/**
 * Creates the lab bridge if needed. The bridge carries only the lab subnet: the host
 * gets .1, machines get no default route, and nothing is forwarded or masqueraded, so
 * lab traffic never leaves this host.
 */
export async function ensureBridge(bridge: string, subnet: Subnet): Promise<void> {
  const exists = (await sh("ip", ["-o", "link", "show", "dev", bridge], { allowFail: true })).trim() !== "";
  if (!exists) {
    await sh("ip", ["link", "add", bridge, "type", "bridge"], { allowFail: true });
  }
  const addrs = await sh("ip", ["-o", "-4", "addr", "show", "dev", bridge]);
  if (!addrs.includes(`${subnet.gateway}/${subnet.bits}`)) {
    await sh("ip", ["addr", "add", `${subnet.gateway}/${subnet.bits}`, "dev", bridge]);
  }
  await sh("ip", ["link", "set", bridge, "up"]);
}

/**
 * Creates an isolated lab bridge if needed: a private subnet the host has no address on
 * (machines on it reach each other; the host reaches them only through a dual-homed
 * machine such as a bastion). A bridge that carries a host address is refused.
 */
export async function ensureIsolatedBridge(bridge: string): Promise<void> {
  const exists = (await sh("ip", ["-o", "link", "show", "dev", bridge], { allowFail: true })).trim() !== "";
  if (!exists) await sh("ip", ["link", "add", bridge, "type", "bridge"], { allowFail: true });
  const addrs = (await sh("ip", ["-o", "-4", "addr", "show", "dev", bridge])).trim();
  if (addrs)
    throw new LabHostError(
      `bridge ${bridge} is to be isolated, but the host has an address on it (${addrs.split(/\s+/)[3]}); ` +
        "use another bridge",
    );
  await sh("ip", ["link", "set", bridge, "up"]);
}

/** Resolves once host:port accepts TCP and sends a line starting with `banner`, or rejects at the deadline. */
export async function waitForBanner(
  host: string,
  port: number,
  banner: string,
  deadlineMs: number,
  gaveUp?: () => string | undefined,
): Promise<void> {
  const answers = () =>
    new Promise<string | undefined>((resolve) => {
      const s = connect({ host, port, timeout: 2_000 });
      let buf = "";
      s.on("data", (d) => {
        buf += d.toString();
        if (buf.startsWith(banner)) {
          s.destroy();
          resolve(undefined);
        }
      });
      s.on("timeout", () => (s.destroy(), resolve("no answer within 2s")));
      s.on("error", (e) => resolve(e.message));
      s.on("close", () =>
        resolve(buf.startsWith(banner) ? undefined : buf ? `answered ${JSON.stringify(buf)}` : "closed"),
      );
    });
  try {
    await pollUntil(
      async (miss) => {
        // The process that would answer has already exited: no point waiting out the deadline.
        const why = gaveUp?.();
        if (why) throw new LabHostError(`${host}:${port} will not answer: ${why}`);
        const problem = await answers();
        return problem ? miss(problem) : true;
      },
      { what: `${host}:${port} answering with "${banner}"`, deadlineMs, intervalMs: 20, maxIntervalMs: 500 },
    );
  } catch (e) {
    if (e instanceof DeadlineError) throw new LabHostError(e.message);
    throw e;
  }
}

/** Waits until `check()` is true or the deadline passes. */
export async function waitFor(what: string, check: () => Promise<boolean>, deadlineMs: number): Promise<void> {
  try {
    await pollUntil(async () => ((await check()) ? true : undefined), { what, deadlineMs });
  } catch (e) {
    if (e instanceof DeadlineError) throw new LabHostError(`timed out after ${deadlineMs / 1000}s waiting for ${what}`);
    throw e;
  }
}
