// An etcd client of an etcd-only lab cluster through the lab's load balancer (molt:lab.lbHealthCheck
// serves etcd's client port): every `intervalMs` a write and a read-back, each on a client of its
// own (a fresh connection, so the load balancer picks a server each time), never retried: every
// request that fails is counted, as a client without retries would see it.
import { Etcd3 } from "etcd3";
import type { readClientTls } from "./vip-probe";

export interface EndpointProbeStats {
  requests: number;
  failures: number;
  /**
   * Of the failures, those etcd itself answered while its leadership moved (a proposal dropped):
   * not the load balancer's; a real client (kube-apiserver's) retries them.
   */
  leaderChanges: number;
  errors: string[];
  /** [from, to] ms after the start, of each run of failed requests. */
  outages: [number, number][];
  /** Longest of the outages (ms). */
  longestOutageMs: number;
}

type Tls = Awaited<ReturnType<typeof readClientTls>>;

/** etcd's own answers while leadership moves. */
const LEADER_CHANGE = /leader changed|proposal dropped|no leader/i;

/** A fault-handling policy (cockatiel's shape, as etcd3 calls it) that runs the call once. */
const ONE_ATTEMPT = {
  execute: <T>(fn: (c: { signal: AbortSignal }) => PromiseLike<T> | T) =>
    Promise.resolve(fn({ signal: new AbortController().signal })),
} as unknown as NonNullable<NonNullable<ConstructorParameters<typeof Etcd3>[0]>["faultHandling"]>["global"];

export function startEtcdEndpointProbe(
  endpoint: string,
  tls: Tls,
  intervalMs = 100,
): { stop: () => Promise<EndpointProbeStats> } {
  const stats: EndpointProbeStats = {
    requests: 0,
    failures: 0,
    leaderChanges: 0,
    errors: [],
    outages: [],
    longestOutageMs: 0,
  };
  const t0 = Date.now();
  let failingSince: number | undefined;
  let running = true;
  let n = 0;
  const record = (ok: boolean, e?: unknown) => {
    stats.requests++;
    const now = Date.now() - t0;
    if (ok) {
      if (failingSince !== undefined) stats.outages.push([failingSince, now]);
      failingSince = undefined;
      return;
    }
    stats.failures++;
    if (LEADER_CHANGE.test(String((e as Error)?.message ?? e))) stats.leaderChanges++;
    failingSince ??= now;
    const msg = `${new Date().toISOString().slice(11, 23)} ${String((e as Error)?.message ?? e).split("\n")[0]}`;
    if (stats.errors.length < 10) stats.errors.push(msg.slice(0, 200));
  };
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const deadline = Date.now() + 2000;
      const client = new Etcd3({
        hosts: `https://${endpoint}`,
        credentials: {
          rootCertificate: Buffer.from(tls.ca),
          certChain: Buffer.from(tls.cert),
          privateKey: Buffer.from(tls.key),
        },
        // The members' certificates name themselves and localhost, not the load balancer.
        grpcOptions: { "grpc.ssl_target_name_override": "localhost" },
        defaultCallOptions: () => ({ deadline }),
        // One attempt per request: the client's own failover would hide the load balancer's pick.
        faultHandling: { global: ONE_ATTEMPT },
      });
      const key = `molt-lb-probe/${n++}`;
      try {
        await client.put(key).value(String(started)).exec();
        record(true);
        const got = await client.get(key).string();
        record(got === String(started), got === String(started) ? undefined : new Error(`read ${got}`));
      } catch (e) {
        record(false, e);
      } finally {
        client.close();
      }
      const rest = intervalMs - (Date.now() - started);
      if (rest > 0) await new Promise((r) => setTimeout(r, rest));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      if (failingSince !== undefined) stats.outages.push([failingSince, Date.now() - t0]);
      stats.longestOutageMs = Math.max(0, ...stats.outages.map(([from, to]) => to - from));
      return stats;
    },
  };
}
