// A client of the API endpoint VIP of an etcd-only lab cluster (molt:apiEndpoint mode vip):
// every 100 ms it writes a key and reads it back through https://VIP:2379 (gRPC, client-
// certificate TLS), each round trip on a client of its own (a fresh connection), so it
// measures the endpoint itself: which member answered (the VIP's holder), and every failure
// with its time. (Debian's etcd 3.4 has no JSON gateway.)
import { Etcd3 } from "etcd3";
import { SshSession } from "../../infra/remote/ssh";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { RoundTrips, type TripCounts } from "./round-trips";

export interface VipProbeReport extends TripCounts {
  ok: number;
  /** Longest time between two successful write+read round trips. */
  longestGapMs: number;
  /** When the longest gap began (time of day, UTC): to set beside keepalived's logs and VRRP adverts. */
  longestGapFrom: string;
  /** The member ids that answered, in the order they took over (one entry per change). */
  holders: { memberId: string; at: number }[];
  acknowledged: Map<string, string>;
}

interface Tls {
  ca: string;
  cert: string;
  key: string;
}

/** The etcd client certificate, read once from a node (the lab's own CA signs it). */
export async function readClientTls(ep: NodeEndpoint, privateKey: string): Promise<Tls> {
  const ssh = await SshSession.connect({
    host: ep.sshHost,
    port: ep.sshPort,
    user: "root",
    privateKey,
    hostKey: ep.hostPublicKey,
  });
  try {
    const pki = "/etc/kubernetes/pki/etcd";
    const [ca, cert, key] = await Promise.all(
      ["ca.crt", "healthcheck-client.crt", "healthcheck-client.key"].map((f) => ssh.run(`cat ${pki}/${f}`, f)),
    );
    return { ca, cert, key };
  } finally {
    ssh.close();
  }
}

/**
 * One write and read-back through the VIP on a client of its own (a fresh connection), both
 * within one deadline: the client library's own retries of a call cannot take it past that.
 */
async function roundTrip(vip: string, tls: Tls, key: string, value: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  const client = new Etcd3({
    hosts: `https://${vip}:2379`,
    credentials: {
      rootCertificate: Buffer.from(tls.ca),
      certChain: Buffer.from(tls.cert),
      privateKey: Buffer.from(tls.key),
    },
    defaultCallOptions: () => ({ deadline }),
  });
  try {
    const put = await client.put(key).value(value).exec();
    const got = await client.get(key).string();
    if (got !== value) throw new Error(`read ${got} after writing ${value}`);
    return put.header.member_id;
  } finally {
    client.close();
  }
}

/** A first error that says the client could not reach the VIP at all (not a request etcd dropped). */
// Not "LB pick" alone: gRPC names the pick's time in every deadline on a new connection
// ("..., LB pick: 0.002s, remote_addr=..."); "Waiting for LB pick" is a connection never made.
export const CONNECTION_FAILURE = /Waiting for LB pick|No connection established|ECONNREFUSED|ECONNRESET|EHOSTUNREACH/;

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);

export function startVipProbe(vip: string, tls: Tls, intervalMs = 100): { stop: () => Promise<VipProbeReport> } {
  const report: VipProbeReport = {
    ok: 0,
    failed: 0,
    errors: [],
    retried: [],
    longestGapMs: 0,
    longestGapFrom: "",
    holders: [],
    acknowledged: new Map(),
  };
  let running = true;
  let lastOk = Date.now();
  const trips = new RoundTrips("molt-vip-probe", report, intervalMs, 30);
  /** A round trip succeeded at `now` (or the probe stops then): the gap since the last one. */
  const noteGap = (now: number, succeeded = true) => {
    if (now - lastOk > report.longestGapMs) {
      report.longestGapMs = now - lastOk;
      report.longestGapFrom = clock(lastOk);
    }
    if (succeeded) lastOk = now;
  };
  const loop = (async () => {
    // A round trip still being retried when the probe is stopped is seen through, to its end.
    while (running || trips.retrying) {
      const trip = trips.next();
      const { key, value } = trip;
      try {
        const member = await roundTrip(vip, tls, key, value, trips.left(trip, 2000));
        report.acknowledged.set(key, value);
        if (report.holders[report.holders.length - 1]?.memberId !== member)
          report.holders.push({ memberId: member, at: Date.now() });
        report.ok++;
        trips.succeeded(trip);
        noteGap(Date.now());
      } catch (e) {
        trips.attemptFailed(trip, `${clock(Date.now())} ${(e as Error).message.split("\n")[0]}`);
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      noteGap(Date.now(), false);
      return report;
    },
  };
}
