// The lease in the cluster (molt:lock.in cluster; Pulumi Cloud and gs:// by default), over an
// in-memory etcd with etcd's rules: a live run's lease is never taken; etcd lets a lease go
// when it is not kept alive, and the next taker reports whose it was; a holder that cannot
// keep it alive, or whose lease etcd let go, loses it before anyone may take it.
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  acquireClusterLock,
  ClusterLockUnavailableError,
  clusterLockKeys,
  readClusterLease,
} from "../../orchestrator/lease/cluster";
import { ConcurrentRolloutError, type HeldLock } from "../../orchestrator/lease/bucket";
import { leaseHome } from "../../orchestrator/lease/hold";
import { BackendError } from "../../orchestrator/stack/driver";
import { isUpdateInProgress } from "../../orchestrator/stack/state-changed";
import { MemoryLeaseKv } from "../support/memory-lease-kv";

const runnerA = { host: "runner-a", machine: "boot-a/pidns-a" };
const runnerB = { host: "runner-b", machine: "boot-b/pidns-b" };

describe("the rollout lock in the cluster (an etcd lease)", () => {
  let t: number;
  let kv: MemoryLeaseKv;
  const held: HeldLock[] = [];
  const take = async (identity: typeof runnerA, ttlSeconds = 30) => {
    const l = await acquireClusterLock(kv, "prod", "rollout", { ttlSeconds, identity });
    held.push(l);
    return l;
  };
  beforeEach(() => {
    t = 1_000_000;
    kv = new MemoryLeaseKv(() => t);
  });
  afterEach(async () => {
    for (const l of held.splice(0)) await l.release().catch(() => undefined);
  });

  it("takes a free stack: the record under the lease key, on an etcd lease", async () => {
    const l = await take(runnerA);
    assert.equal(l.scope, "cluster");
    assert.match(l.where, /\/molt\/locks\/prod\/lease in the fake cluster's etcd/);
    assert.equal((await readClusterLease(kv, "prod"))?.runId, l.holder.runId);
    assert.notEqual(kv.peek(clusterLockKeys("prod").key)?.lease, "0", "the key lives on a lease");
    assert.equal(l.recoveredFrom, undefined);
  });

  it("refuses a second runner while the first holds it, saying when etcd lets it go; frees it on release", async () => {
    const a = await take(runnerA);
    t += 12_000;
    await assert.rejects(take(runnerB), (e: unknown) => {
      assert.ok(e instanceof ConcurrentRolloutError);
      assert.equal(e.holder.runId, a.holder.runId);
      assert.equal(e.expiresInSeconds, 18, "etcd's own count of the lease's time left");
      assert.match(e.message, /pid \d+ on runner-a/);
      return true;
    });
    await a.release();
    assert.equal(kv.peek(clusterLockKeys("prod").key), undefined);
    assert.equal(kv.peek(clusterLockKeys("prod").last), undefined, "a clean release leaves no record behind");
    const b = await take(runnerB);
    assert.equal(b.recoveredFrom, undefined, "a released stack is free, not recovered");
  });

  it("takes another machine's lease only once etcd let it go, and reports whose it was", async () => {
    const a = await acquireClusterLock(kv, "prod", "rollout", { ttlSeconds: 30, identity: runnerA });
    // A dies: it never releases, and nobody keeps its lease alive.
    t += 29_000;
    await assert.rejects(take(runnerB), ConcurrentRolloutError);
    t += 2_000;
    const b = await take(runnerB);
    assert.equal(b.recoveredFrom?.reason, "expired");
    assert.equal(b.recoveredFrom?.holder.runId, a.holder.runId);
    assert.equal(b.recoveredFrom?.holder.host, "runner-a");
    void a.lost; // a's timers are unref'd; its lease is gone
  });

  it("takes the lease of a run that died on this machine at once, and reports it", async () => {
    const dead = spawn(process.execPath, ["-e", ""]);
    const pid = await new Promise<number>((r) => dead.on("exit", () => r(dead.pid!)));
    const here = { host: "runner-a", machine: "boot-a/pidns-a" };
    await acquireClusterLock(kv, "prod", "rollout", { ttlSeconds: 30, identity: { ...here, pid } });
    const b = await take(here);
    assert.equal(b.recoveredFrom?.reason, "process-gone");
    assert.equal(b.recoveredFrom?.holder.pid, pid);
  });

  it("never takes the lease of a live process on this machine", async () => {
    const here = { host: "runner-a", machine: "boot-a/pidns-a" };
    await acquireClusterLock(kv, "prod", "rollout", { ttlSeconds: 30, identity: { ...here, pid: process.pid } });
    await assert.rejects(take({ ...here }), ConcurrentRolloutError);
  });

  it("keeps the lease alive while the run lives (real time)", async function () {
    this.timeout(15_000);
    kv = new MemoryLeaseKv();
    const a = await take(runnerA, 3);
    await new Promise((r) => setTimeout(r, 4_500));
    assert.equal(a.signal.aborted, false);
    await assert.rejects(take(runnerB, 3), ConcurrentRolloutError, "kept alive past its time to live");
  });

  it("gives the lease up before etcd could let it go when no member answers (real time)", async function () {
    this.timeout(15_000);
    kv = new MemoryLeaseKv();
    const a = await take(runnerA, 3);
    const t0 = performance.now();
    kv.down = true;
    const e = await a.lost;
    const after = performance.now() - t0;
    assert.ok(a.signal.aborted);
    assert.match(e.message, /could not be renewed .*no etcd member is reachable/);
    assert.ok(
      after < 3_000 - 500,
      `gave it up ${Math.round(after)} ms after the last answered renewal, before the ttl`,
    );
  });

  it("loses the lease when etcd let it go or its key was removed by hand", async function () {
    this.timeout(15_000);
    kv = new MemoryLeaseKv();
    const a = await take(runnerA, 3);
    const { key } = clusterLockKeys("prod");
    await kv.revoke(kv.peek(key)!.lease);
    const e = await a.lost;
    assert.match(e.message, /etcd let its lease go/);
  });

  it("refuses, changing nothing, when the cluster cannot be reached", async () => {
    kv.down = true;
    await assert.rejects(take(runnerA), (e: unknown) => {
      assert.ok(e instanceof ClusterLockUnavailableError);
      assert.match(
        e.message,
        /cannot take stack "prod"'s lock in its cluster: .*no etcd member is reachable.*nothing was changed/,
      );
      return true;
    });
    kv.down = false;
    assert.equal(kv.peek(clusterLockKeys("prod").key), undefined);
  });

  it("keeps each stack's lease under its own keys", () => {
    assert.notEqual(clusterLockKeys("prod").key, clusterLockKeys("prod/x").key);
    assert.equal(clusterLockKeys("org/proj/prod").key, "/molt/locks/org%2Fproj%2Fprod/lease");
  });

  describe("where the lease lives (molt:lock.in)", () => {
    const rows: [string, "backend" | "cluster" | undefined, "backend" | "cluster" | Error][] = [
      ["file:///tmp", undefined, "backend"],
      ["s3://bucket?region=us-east-1", undefined, "backend"],
      ["https://api.pulumi.com", undefined, "cluster"],
      ["gs://bucket", undefined, "cluster"],
      ["file:///tmp", "cluster", "cluster"],
      ["https://api.pulumi.com", "cluster", "cluster"],
      ["https://api.pulumi.com", "backend", new Error()],
      ["gs://bucket", "backend", new Error()],
    ];
    for (const [url, lockIn, want] of rows)
      it(`${url} with molt:lock.in ${lockIn ?? "unset"}: ${want instanceof Error ? "refused" : want}`, () => {
        if (want instanceof Error)
          assert.throws(
            () => leaseHome(url, lockIn),
            (e: unknown) =>
              e instanceof BackendError &&
              /molt:lock\.in is "backend", but molt cannot keep a lease in this backend.*set molt:lock\.in to "cluster"/.test(
                e.message,
              ),
          );
        else assert.equal(leaseHome(url, lockIn), want);
      });
  });
});

describe("an update refused because another holds the stack (the engine's words)", () => {
  const rows: [string, boolean][] = [
    [
      "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete " +
        "the lock file with `pulumi cancel`.",
      true,
    ],
    ["error: [409] Conflict: Another update is currently in progress.", true],
    ["error: update failed", false],
    ["error: 1 error occurred: creating the machine: exit status 1", false],
  ];
  for (const [message, busy] of rows)
    it(`${busy ? "busy" : "not busy"}: ${message.slice(0, 60)}`, () => assert.equal(isUpdateInProgress(message), busy));
});
