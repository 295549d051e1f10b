// One rollout per stack where the backend holds nothing molt can write (Pulumi Cloud, gs://,
// or `molt:lock.in: cluster`): the cluster holds the lease, in its own etcd.
//  - The key `/molt/locks/<stack>/lease` is written in a transaction that requires it absent,
//    attached to an etcd lease of the run's time to live: etcd's concurrency API (the
//    `etcdctl lock` recipe) without its queue, since a second run is refused, not queued.
//  - The holder keeps the etcd lease alive; etcd itself deletes the key when it stops (its
//    leader's clock decides, never a runner's), and a new leader extends every lease, so a
//    lease is never cut short by an election. Taking a free stack is the same transaction.
//  - `/molt/locks/<stack>/last` (no lease) keeps the holder's record until it releases: a
//    taker that finds it without the lease key reports whose lease expired.
//  - A holder that cannot keep its lease alive gives it up a margin before etcd could let it
//    go (bucket.ts keepRenewed, the same rule as the bucket lease).
// Every call goes to the first member that answers (keep-alives and reads to all at once,
// transactions one after another; a node being replaced, a learner that refuses lease calls,
// a dropped tunnel cost nothing), so the lease survives the rollout replacing every node it
// was taken through.
import type { KvEntry, LeaseKv } from "../core/edges";
import type { Etcd3 } from "etcd3";
import { alive } from "../../lib/process";
import { anyMember as anyMemberOf, fastest as fastestOf } from "../edges/etcd-members";
import {
  ConcurrentRolloutError,
  keepRenewed,
  leaseRecord,
  newHolder,
  parseLeaseRecord,
  type HeldLock,
  type LockHolder,
  type LockOptions,
} from "./bucket";

export class ClusterLockUnavailableError extends Error {
  constructor(stack: string, detail: string) {
    super(
      `cannot take stack "${stack}"'s lock in its cluster: ${detail}; nothing was changed. ` +
        "The lock of a backend without an object store molt can write (Pulumi Cloud, gs://) lives in the " +
        "cluster's etcd, which needs a quorum reachable over SSH: check the nodes (`molt status`), or keep the " +
        "state in a file://, s3:// or azblob:// backend, whose lease needs no cluster.",
    );
    this.name = "ClusterLockUnavailableError";
  }
}

export function clusterLockKeys(stack: string): { key: string; last: string } {
  const base = `/molt/locks/${encodeURIComponent(stack)}`;
  return { key: `${base}/lease`, last: `${base}/last` };
}

export async function acquireClusterLock(
  kv: LeaseKv,
  stack: string,
  command: string,
  o: Pick<LockOptions, "ttlSeconds" | "engineBound" | "identity" | "onRenewError"> & { ttlSeconds: number },
): Promise<HeldLock> {
  const { ttlSeconds } = o;
  const { key, last } = clusterLockKeys(stack);
  const where = `${key} in ${kv.location}`;
  const holder = newHolder(command, o);
  const record = leaseRecord(holder, ttlSeconds);
  let lease: string;
  // etcd counts the lease from its grant: so does the holder's deadline, however long the take takes.
  const sentAt = performance.now();
  try {
    lease = await kv.grant(ttlSeconds);
  } catch (e) {
    throw new ClusterLockUnavailableError(stack, (e as Error).message.split("\n")[0]);
  }

  let revision: string | undefined;
  let recoveredFrom: HeldLock["recoveredFrom"];
  try {
    for (let attempt = 0; attempt < 4 && !revision; attempt++) {
      const r = await kv.take(key, last, record, lease);
      if (r.ok) {
        revision = r.revision;
        const prev = r.previousLast ? parseLeaseRecord(r.previousLast) : undefined;
        // A record in `last` without the lease key: its holder never released, and etcd let its lease go.
        if (prev && prev.holder.runId !== holder.runId)
          recoveredFrom = { holder: prev.holder, reason: "expired", renewedAt: prev.renewedAt };
        break;
      }
      if (!r.current) continue; // released (or expired) between the compare and the read
      const rec = parseLeaseRecord(r.current.value);
      const other: Partial<LockHolder> = rec?.holder ?? { host: "unknown (unreadable lock)", pid: 0 };
      if (rec?.holder.runId === holder.runId) {
        // Our own transaction landed, but its answer was lost and the call was retried.
        revision = r.current.revision;
        break;
      }
      if (other.host === holder.host && other.machine === holder.machine && other.pid && other.pid > 0) {
        if (alive(other.pid)) throw new ConcurrentRolloutError(stack, other, where);
        // Died on this machine: take it now, on the revision judged dead (one winner).
        const t = await kv.take(key, last, record, lease, r.current.revision);
        if (t.ok) {
          revision = t.revision;
          recoveredFrom = { holder: other, reason: "process-gone", ...(rec ? { renewedAt: rec.renewedAt } : {}) };
          await kv.revoke(r.current.lease).catch(() => undefined);
        }
        continue;
      }
      const left = await kv.timeToLive(r.current.lease).catch(() => undefined);
      throw new ConcurrentRolloutError(
        stack,
        other,
        where,
        left === undefined ? (rec?.ttlSeconds ?? ttlSeconds) : Math.max(left, 0),
        rec?.ttlSeconds ?? ttlSeconds,
      );
    }
    if (!revision) throw new ConcurrentRolloutError(stack, { host: "unknown", pid: 0 }, where, ttlSeconds, ttlSeconds);
  } catch (e) {
    await kv.revoke(lease).catch(() => undefined);
    if (e instanceof ConcurrentRolloutError) throw e;
    throw new ClusterLockUnavailableError(stack, (e as Error).message.split("\n")[0]);
  }

  const held = revision;
  const kept = keepRenewed({
    stack,
    ttlSeconds,
    sentAt,
    ...(o.onRenewError ? { onRenewError: o.onRenewError } : {}),
    giveUp: async () => {
      await kv.release(key, last, held);
      await kv.revoke(lease).catch(() => undefined);
    },
    renew: async () => {
      const ttl = await kv.keepAlive(lease);
      if (ttl <= 0) return { kind: "lost", detail: `etcd let its lease go (lease ${lease})` };
      // The key itself: deleted by hand, it no longer keeps anyone out.
      const cur = await kv.get(key);
      if (!cur || cur.revision !== held) {
        const by = cur ? parseLeaseRecord(cur.value)?.holder : undefined;
        return {
          kind: "lost",
          detail: by ? `run ${by.runId} (pid ${by.pid} on ${by.host}) holds it now` : `its key ${key} was removed`,
        };
      }
      return { kind: "renewed" };
    },
  });

  return { where, scope: "cluster", holder, ttlSeconds, ...(recoveredFrom ? { recoveredFrom } : {}), ...kept };
}

/** The live holder of a stack's cluster lease, or undefined (status, tests, the chaos harness). */
export async function readClusterLease(kv: LeaseKv, stack: string): Promise<LockHolder | undefined> {
  const cur = await kv.get(clusterLockKeys(stack).key);
  return cur ? parseLeaseRecord(cur.value)?.holder : undefined;
}

const CALL_MS = 5_000;

/**
 * LeaseKv over etcd3 clients, one per member: each call goes to the first that answers.
 * `clients` is asked on every call (the members change as the rollout replaces nodes).
 */
export function etcdLeaseKv(location: string, clients: () => Etcd3[]): LeaseKv {
  const anyMember = <T>(what: string, call: (c: Etcd3) => Promise<T>) => anyMemberOf(clients, what, call);
  const fastest = <T>(what: string, call: (c: Etcd3) => Promise<T>) => fastestOf(clients, what, call);
  const entry = (kv: { value: Buffer; lease: string; mod_revision: string } | undefined): KvEntry | undefined =>
    kv ? { value: Buffer.from(kv.value), lease: kv.lease, revision: kv.mod_revision } : undefined;
  return {
    location,
    grant: (ttl) =>
      anyMember("granting an etcd lease", async (c) => (await c.leaseClient.leaseGrant({ TTL: ttl, ID: 0 })).ID),
    keepAlive: (id) =>
      fastest("keeping the etcd lease alive", async (c) => {
        const stream = await c.leaseClient.leaseKeepAlive({ deadline: Date.now() + CALL_MS });
        try {
          const res = await new Promise<{ TTL: string }>((resolve, reject) => {
            stream.on("data", resolve);
            stream.on("error", reject);
            stream.on("end", () => reject(new Error("the keep-alive stream ended without an answer")));
            stream.write({ ID: id });
          });
          return Number(res.TTL);
        } finally {
          stream.end();
        }
      }),
    timeToLive: (id) =>
      fastest("reading an etcd lease", async (c) => Number((await c.leaseClient.leaseTimeToLive({ ID: id })).TTL)),
    revoke: (id) =>
      anyMember("revoking an etcd lease", async (c) => {
        try {
          await c.leaseClient.leaseRevoke({ ID: id });
        } catch (e) {
          if (!/lease not found/i.test((e as Error).message)) throw e;
        }
      }),
    take: (key, last, value, lease, ifRevision) =>
      anyMember("taking the lock key", async (c) => {
        const r = await c
          .if(key, ifRevision ? "Mod" : "Create", "==", ifRevision ? Number(ifRevision) : 0)
          .then(c.get(last), c.put(key).value(value).lease(lease), c.put(last).value(value))
          .else(c.get(key))
          .commit();
        if (r.succeeded) {
          const prev = r.responses[0].response_range.kvs[0];
          return {
            ok: true as const,
            revision: r.header.revision,
            ...(prev ? { previousLast: Buffer.from(prev.value) } : {}),
          };
        }
        const cur = entry(r.responses[0].response_range.kvs[0]);
        return { ok: false as const, ...(cur ? { current: cur } : {}) };
      }),
    get: (key) =>
      fastest("reading the lock key", async (c) => {
        const r = await c.kv.range({ key: Buffer.from(key), serializable: false });
        return entry(r.kvs[0]);
      }),
    release: (key, last, revision) =>
      anyMember("releasing the lock key", async (c) => {
        const r = await c
          .if(key, "Mod", "==", Number(revision))
          .then(c.delete().key(key), c.delete().key(last))
          .commit();
        return r.succeeded;
      }),
  };
}
