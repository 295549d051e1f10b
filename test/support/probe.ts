// A client that keeps writing and reading keys through the etcd endpoints of whatever
// machines the lab has (found like a cloud console would: from the lab's own records),
// across a whole rollout, recording every result. Its tunnels are its own.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../../infra/lab/settings";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import type { BastionTarget } from "../../infra/remote/ssh";
import { RoundTrips, type TripCounts } from "./round-trips";

export interface ProbeReport extends TripCounts {
  ok: number;
  acknowledged: Map<string, string>;
  /** Longest time between two successful write+read round trips (the probe's own reconnects left out). */
  longestGapMs: number;
  /** Time spent opening the probe's tunnels (when machines came or went). */
  reconnectMs: number;
}

export function labEndpoints(lab: LabSettings): NodeEndpoint[] {
  const dir = join(lab.labRoot, "labs", lab.lab);
  const addrDir = join(dir, "addresses");
  if (!existsSync(addrDir)) return [];
  return readdirSync(addrDir).flatMap((ip) => {
    const name = readFileSync(join(addrDir, ip), "utf8").trim();
    const pub = join(dir, "machines", name, "root/etc/ssh/ssh_host_ed25519_key.pub");
    if (!existsSync(pub)) return [];
    return [
      {
        name,
        privateAddress: ip,
        sshHost: ip,
        sshPort: 22,
        hostPublicKey: readFileSync(pub, "utf8").trim(),
        providerId: name,
      },
    ];
  });
}

export interface ProbeOptions {
  /** Also log in with this ssh-agent (machines molt did not create). */
  agent?: string;
  /** Through this bastion (an isolated lab). */
  bastion?: BastionTarget;
  /** Which of the lab's machines to use (default: all). */
  include?: (e: NodeEndpoint) => boolean;
}

export function startClusterProbe(
  lab: LabSettings,
  sshPrivateKey: string,
  intervalMs = 50,
  opts: ProbeOptions = {},
): { stop: () => Promise<ProbeReport> } {
  const report: ProbeReport = {
    ok: 0,
    failed: 0,
    errors: [],
    retried: [],
    acknowledged: new Map(),
    longestGapMs: 0,
    reconnectMs: 0,
  };
  let running = true;
  let access: EtcdAccess | undefined;
  /** The machines whose etcd is a voting member (a client of a real cluster never talks to a learner). */
  let voterNodes: string[] | undefined;
  let client: ReturnType<EtcdAccess["voters"]> | undefined;
  let known = "";
  let lastOk = Date.now();
  const trips = new RoundTrips("molt-probe", report, intervalMs);
  const stamp = (e: unknown) =>
    `${new Date().toISOString().slice(11, 23)} ${(e as Error).message.split("\n")[0]}` +
    ` (machines ${known || "(reopening)"}; voters ${voterNodes?.join(",") ?? "(not asked yet)"})`;
  const loop = (async () => {
    // A round trip still being retried when the probe is stopped is seen through, to its end.
    while (running || trips.retrying) {
      const trip = trips.next();
      try {
        const eps = labEndpoints(lab).filter(opts.include ?? (() => true));
        const sig = eps
          .map((e) => e.name)
          .sort()
          .join(",");
        if (sig !== known || !access) {
          // The probe's own reconnect (new SSH tunnels to every machine) is not the
          // cluster's unavailability: its duration is left out of the gap.
          const tOpen = Date.now();
          const next = await EtcdAccess.open(eps, {
            user: "root",
            privateKey: sshPrivateKey,
            ...(opts.agent ? { agent: opts.agent } : {}),
            ...(opts.bastion ? { bastion: opts.bastion } : {}),
          }).catch(() => undefined);
          lastOk += Date.now() - tOpen;
          report.reconnectMs += Date.now() - tOpen;
          if (next) {
            await access?.close();
            access = next;
            known = sig;
            voterNodes = undefined;
          }
        }
        if (!access) throw new Error("no tunnel");
        if (voterNodes === undefined) {
          voterNodes = await votersAmong(access);
          // One client (one gRPC channel per voter) until the machines or voters change, like an
          // application's: a client per request would put a TLS handshake through the tunnel
          // into every round trip the probe times.
          client = access.voters(voterNodes);
        }
        if (!client) throw new Error("no client");
        const { key, value } = trip;
        // Each attempt gives up after 2 s (a dropped proposal, or a request stuck on a tunnel to a
        // machine that just vanished) and goes again, through fresh tunnels.
        await within(trips.left(trip, 2000), client.put(key).value(value).exec(), "write");
        report.acknowledged.set(key, value);
        const got = await within(trips.left(trip, 2000), client.get(key).string(), "read");
        if (got !== value) throw new Error(`read ${got} after writing ${value}`);
        report.ok++;
        trips.succeeded(trip);
        const now = Date.now();
        report.longestGapMs = Math.max(report.longestGapMs, now - lastOk);
        lastOk = now;
      } catch (e) {
        const error = stamp(e);
        trips.attemptFailed(trip, error);
        known = ""; // re-open tunnels: a node may have gone
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      await access?.close();
      report.longestGapMs = Math.max(report.longestGapMs, Date.now() - lastOk);
      return report;
    },
  };
}

/**
 * The nodes whose own etcd says it is a voter. A learner (a new node before its promotion)
 * rejects reads and writes ("rpc not supported for learner"), so a client that picked it
 * would report the cluster as failing while it is not; a machine whose etcd does not answer
 * yet is left out too. Asked again whenever the set of machines changes.
 */
async function votersAmong(access: EtcdAccess): Promise<string[]> {
  const nodes = access.nodes();
  const learner = await Promise.all(
    nodes.map((n) =>
      within(2000, access.status(n), "status").then(
        (s) => s.isLearner,
        () => true,
      ),
    ),
  );
  const voters = nodes.filter((_, i) => !learner[i]);
  if (voters.length === 0) throw new Error(`no voter among ${nodes.join(", ")}`);
  return voters;
}

function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)),
  );
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
